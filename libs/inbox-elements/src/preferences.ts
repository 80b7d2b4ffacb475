import type { InboxClient } from "@notify/inbox-client";
import { css, html, nothing } from "lit";
import { ConnectedElement, describeError } from "./base.js";
import { tokens } from "./styles.js";

/** The user's preferences as the inbox token reads them (GET /api/v1/inbox/preferences). */
export type InboxPreferences = Awaited<ReturnType<InboxClient["preferences"]>>;
type Patch = Parameters<InboxClient["updatePreferences"]>[0];
/** A topic the user may turn off; a locked one (a critical category) is always sent. */
type CategoryEntry = { category: string; opted_out: boolean; locked: boolean };
const categoriesOf = (preferences: InboxPreferences): CategoryEntry[] =>
  (preferences as { categories?: CategoryEntry[] }).categories ?? [];

/** The channels a user can turn off, in the order shown. */
export const PREFERENCE_CHANNELS = ["in_app", "email", "push", "sms"] as const;

/** Languages offered besides the stored one; each is named in the page's language. */
const LANGUAGES = ["en", "en-GB", "de", "fr", "es", "it", "nl", "pt-BR", "ja"];

interface Form {
  receive: Record<string, boolean>;
  categories: Array<{ category: string; receive: boolean; locked: boolean }>;
  quiet: boolean;
  start: string;
  end: string;
  timeZone: string;
  language: string;
}

const browserZone = () => {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  } catch {
    return "UTC";
  }
};

const zones = (() => {
  let cached: string[] | null = null;
  return () => {
    if (cached) return cached;
    try {
      cached = Intl.supportedValuesOf("timeZone");
    } catch {
      cached = ["UTC"];
    }
    return cached;
  };
})();

/**
 * `<notify-preferences>`: the user's preference centre. Channels and topics (categories) are
 * toggles; a critical topic is shown on and disabled, with the reason. Quiet hours take a start,
 * an end and the time zone, which is also the user's; the language is the one notifications are
 * written in. Saved with one button; the outcome is announced.
 *
 * @fires notify-preferences:saved - detail.preferences, as stored.
 * @fires notify-preferences:error - detail.error, when loading or saving failed.
 */
export class NotifyPreferences extends ConnectedElement {
  static override properties = {
    ...ConnectedElement.properties,
    channels: {
      converter: {
        fromAttribute: (value: string | null) => (value ?? "").split(/[\s,]+/).filter((channel) => channel !== ""),
        toAttribute: (value: string[]) => value.join(" "),
      },
    },
    form: { state: true },
    phase: { state: true },
    message: { state: true },
  };

  /** The channels offered (attribute: a space- or comma-separated list); all four by default. */
  declare channels: string[];
  declare protected form: Form | null;
  /** The form as the stored document filled it: a save sends only what differs from it. */
  private shown: Form | null = null;
  declare protected phase: "loading" | "load-failed" | "ready" | "saving" | "saved" | "save-failed";
  declare protected message: string;
  private stored: InboxPreferences | null = null;
  private generation = 0;

  constructor() {
    super();
    this.channels = [...PREFERENCE_CHANNELS];
    this.form = null;
    this.phase = "loading";
    this.message = "";
  }

  static override styles = [
    tokens,
    css`
      :host {
        display: block;
        max-width: var(--notify-preferences-width, 560px);
      }
      .form {
        display: grid;
        gap: calc(var(--_space) * 2);
        background: var(--_bg);
        color: var(--_text);
        border: 1px solid var(--_border);
        border-radius: var(--_radius);
        padding: calc(var(--_space) * 2);
      }
      .title {
        margin: 0;
        font-size: 1.2em;
        font-weight: 600;
      }
      fieldset {
        margin: 0;
        padding: 0;
        border: 0;
        display: grid;
        gap: var(--_space);
      }
      legend {
        padding: 0;
        font-weight: 600;
        margin-bottom: 2px;
      }
      .hint {
        margin: 0;
        color: var(--_muted);
        font-size: 0.9em;
      }
      .option {
        display: flex;
        align-items: flex-start;
        gap: var(--_space);
        padding: calc(var(--_space) * 0.75) var(--_space);
        border: 1px solid var(--_border);
        border-radius: calc(var(--_radius) * 0.75);
        background: var(--_surface);
      }
      .option input {
        margin: 2px 0 0;
        width: 18px;
        height: 18px;
        accent-color: var(--_accent);
        flex: none;
      }
      .option-text {
        display: grid;
      }
      .reason {
        color: var(--_muted);
        font-size: 0.9em;
      }
      .fields {
        display: flex;
        flex-wrap: wrap;
        gap: calc(var(--_space) * 1.5);
      }
      .field {
        display: grid;
        gap: 4px;
      }
      .field input,
      .field select {
        border: 1px solid var(--_border);
        border-radius: calc(var(--_radius) / 2);
        background: var(--_bg);
        padding: 6px 8px;
        min-height: 34px;
        box-sizing: border-box;
      }
      .field select {
        max-width: 100%;
      }
      .actions {
        display: flex;
        align-items: center;
        flex-wrap: wrap;
        gap: calc(var(--_space) * 1.5);
      }
      .message {
        margin: 0;
      }
      .message.saved {
        color: var(--_success);
      }
      .message.failed {
        color: var(--_danger);
      }
    `,
  ];

  protected override attach(client: InboxClient): void {
    void this.load(client);
  }

  protected override detach(): void {
    this.generation++;
    this.form = null;
    this.stored = null;
    this.phase = "loading";
  }

  private async load(client: InboxClient): Promise<void> {
    const generation = ++this.generation;
    this.phase = "loading";
    try {
      const preferences = await client.preferences();
      if (generation !== this.generation) return;
      this.show(preferences);
      this.phase = "ready";
    } catch (error) {
      if (generation !== this.generation) return;
      this.phase = "load-failed";
      this.message = describeError(error);
      this.emit("notify-preferences:error", { error });
    }
  }

  private show(preferences: InboxPreferences): void {
    this.stored = preferences;
    const quiet = preferences.quiet_hours;
    this.form = {
      receive: Object.fromEntries(PREFERENCE_CHANNELS.map((c) => [c, !preferences.channel_optout.includes(c)])),
      categories: categoriesOf(preferences).map((c) => ({
        category: c.category,
        receive: !c.opted_out,
        locked: c.locked,
      })),
      quiet: quiet !== null,
      start: quiet?.start ?? "22:00",
      end: quiet?.end ?? "07:00",
      timeZone: preferences.time_zone ?? quiet?.tz ?? browserZone(),
      language: preferences.locale ?? "",
    };
    this.shown = this.form;
  }

  private change(update: Partial<Form>): void {
    if (!this.form) return;
    this.form = { ...this.form, ...update };
    if (this.phase === "saved" || this.phase === "save-failed") this.phase = "ready";
  }

  private async save(event: Event): Promise<void> {
    event.preventDefault();
    const client = this.inboxClient;
    const form = this.form;
    if (!client || !form || !this.stored || this.phase === "saving") return;
    const listed = new Set(form.categories.map((c) => c.category));
    const before = this.shown ?? form;
    const receiveChanged = PREFERENCE_CHANNELS.some((c) => form.receive[c] !== before.receive[c]);
    const categoriesChanged = form.categories.some(
      (c, i) => c.category !== before.categories[i]?.category || c.receive !== before.categories[i]?.receive,
    );
    const quietChanged =
      form.quiet !== before.quiet ||
      (form.quiet && (form.start !== before.start || form.end !== before.end || form.timeZone !== before.timeZone));
    // Only the fields the user changed: the server merges them into the document, so what this
    // form did not touch (a time zone it only guessed from the browser, a change made elsewhere
    // meanwhile) stays as it is.
    const patch = {
      ...(receiveChanged
        ? {
            channel_optout: PREFERENCE_CHANNELS.filter((c) =>
              this.channels.includes(c) ? !form.receive[c] : this.stored?.channel_optout.includes(c),
            ),
          }
        : {}),
      // Opt-outs of topics this form does not list are kept as they are.
      ...(categoriesChanged
        ? {
            category_optout: [
              ...this.stored.category_optout.filter((c) => !listed.has(c)),
              ...form.categories.filter((c) => !c.receive && !c.locked).map((c) => c.category),
            ],
          }
        : {}),
      ...(quietChanged
        ? { quiet_hours: form.quiet ? { start: form.start, end: form.end, tz: form.timeZone } : null }
        : {}),
      ...(form.timeZone !== before.timeZone ? { time_zone: form.timeZone } : {}),
      ...(form.language !== before.language ? { locale: form.language === "" ? null : form.language } : {}),
    } as Patch;
    const generation = this.generation;
    this.phase = "saving";
    this.message = "";
    try {
      const saved = await client.updatePreferences(patch);
      if (generation !== this.generation) return;
      this.show(saved);
      this.phase = "saved";
      this.message = this.t.saved;
      this.emit("notify-preferences:saved", { preferences: saved });
    } catch (error) {
      if (generation !== this.generation) return;
      this.phase = "save-failed";
      this.message = this.t.saveError(describeError(error));
      this.emit("notify-preferences:error", { error });
    }
  }

  override render() {
    const t = this.t;
    return html`<form part="form" class="form" lang=${t.locale} @submit=${this.save} novalidate>
      <h2 part="title" class="title">${t.preferencesTitle}</h2>
      ${this.renderBody()}
    </form>`;
  }

  private renderBody() {
    const t = this.t;
    const form = this.form;
    if (this.phase === "load-failed") {
      return html`<div part="error" role="alert">
        <p class="message failed">${t.preferencesLoadError} ${this.message}</p>
        <button
          part="action action-retry"
          class="text-button"
          type="button"
          @click=${() => this.inboxClient && this.load(this.inboxClient)}
        >
          ${t.retry}
        </button>
      </div>`;
    }
    if (!form) return html`<p part="loading" class="hint" role="status">${t.preferencesLoading}</p>`;
    const saving = this.phase === "saving";
    return html`${this.renderChannels(form)} ${this.renderCategories(form)} ${this.renderQuietHours(form)}
      <fieldset part="section section-language">
        <legend part="legend">${t.language}</legend>
        <div class="fields">
          <label class="field" part="field">
            <span class="visually-hidden">${t.language}</span>
            <select
              part="select select-language"
              name="locale"
              .value=${form.language}
              @change=${(e: Event) => this.change({ language: (e.target as HTMLSelectElement).value })}
            >
              ${this.languageOptions(form.language)}
            </select>
          </label>
        </div>
      </fieldset>
      <div class="actions">
        <button part="save" class="primary-button" type="submit" ?disabled=${saving}>
          ${saving ? t.saving : t.save}
        </button>
        <p
          part=${this.phase === "save-failed" ? "message message-error" : "message message-saved"}
          class=${`message ${this.phase === "save-failed" ? "failed" : this.phase === "saved" ? "saved" : ""}`}
          role=${this.phase === "save-failed" ? "alert" : "status"}
        >
          ${this.phase === "saved" || this.phase === "save-failed" ? this.message : nothing}
        </p>
      </div>`;
  }

  private renderChannels(form: Form) {
    const t = this.t;
    const shown = PREFERENCE_CHANNELS.filter((c) => this.channels.includes(c));
    return html`<fieldset part="section section-channels" aria-describedby="channels-hint">
      <legend part="legend">${t.channelsLegend}</legend>
      <p class="hint" id="channels-hint" part="hint">${t.channelsHint}</p>
      ${shown.map(
        (channel) => html`<label part="option option-channel" class="option">
          <input
            part="toggle"
            type="checkbox"
            name=${`channel-${channel}`}
            data-channel=${channel}
            .checked=${form.receive[channel] ?? true}
            @change=${(e: Event) =>
              this.change({ receive: { ...form.receive, [channel]: (e.target as HTMLInputElement).checked } })}
          />
          <span class="option-text"><span part="option-label">${t.channelNames[channel] ?? channel}</span></span>
        </label>`,
      )}
    </fieldset>`;
  }

  private renderCategories(form: Form) {
    const t = this.t;
    return html`<fieldset part="section section-categories" aria-describedby="categories-hint">
      <legend part="legend">${t.categoriesLegend}</legend>
      <p class="hint" id="categories-hint" part="hint">${t.categoriesHint}</p>
      ${form.categories.length === 0 ? html`<p class="hint" part="hint">${t.noCategories}</p>` : nothing}
      ${form.categories.map((entry, index) => {
        const reasonId = `category-${index}-reason`;
        return html`<label part=${entry.locked ? "option option-category option-locked" : "option option-category"} class="option">
          <input
            part="toggle"
            type="checkbox"
            name=${`category-${entry.category}`}
            data-category=${entry.category}
            .checked=${entry.locked || entry.receive}
            ?disabled=${entry.locked}
            aria-describedby=${entry.locked ? reasonId : nothing}
            @change=${(e: Event) =>
              this.change({
                categories: form.categories.map((c, i) =>
                  i === index ? { ...c, receive: (e.target as HTMLInputElement).checked } : c,
                ),
              })}
          />
          <span class="option-text">
            <span part="option-label">${entry.category}</span>
            ${entry.locked ? html`<span part="option-reason" class="reason" id=${reasonId}>${t.lockedReason}</span>` : nothing}
          </span>
        </label>`;
      })}
    </fieldset>`;
  }

  private renderQuietHours(form: Form) {
    const t = this.t;
    const zoneList = zones().includes(form.timeZone) ? zones() : [form.timeZone, ...zones()];
    return html`<fieldset part="section section-quiet-hours" aria-describedby="quiet-hint">
      <legend part="legend">${t.quietHoursLegend}</legend>
      <p class="hint" id="quiet-hint" part="hint">${t.quietHoursHint}</p>
      <label part="option option-quiet-hours" class="option">
        <input
          part="toggle"
          type="checkbox"
          name="quiet-hours"
          .checked=${form.quiet}
          @change=${(e: Event) => this.change({ quiet: (e.target as HTMLInputElement).checked })}
        />
        <span class="option-text"><span part="option-label">${t.quietHoursEnabled}</span></span>
      </label>
      <div class="fields">
        <label class="field" part="field">
          <span part="field-label">${t.quietHoursStart}</span>
          <input
            part="input input-start"
            type="time"
            name="quiet-start"
            required
            .value=${form.start}
            ?disabled=${!form.quiet}
            @change=${(e: Event) => this.change({ start: (e.target as HTMLInputElement).value })}
          />
        </label>
        <label class="field" part="field">
          <span part="field-label">${t.quietHoursEnd}</span>
          <input
            part="input input-end"
            type="time"
            name="quiet-end"
            required
            .value=${form.end}
            ?disabled=${!form.quiet}
            @change=${(e: Event) => this.change({ end: (e.target as HTMLInputElement).value })}
          />
        </label>
        <label class="field" part="field">
          <span part="field-label">${t.timeZone}</span>
          <select
            part="select select-time-zone"
            name="time-zone"
            .value=${form.timeZone}
            @change=${(e: Event) => this.change({ timeZone: (e.target as HTMLSelectElement).value })}
          >
            ${zoneList.map((zone) => html`<option value=${zone} ?selected=${zone === form.timeZone}>${zone}</option>`)}
          </select>
        </label>
      </div>
    </fieldset>`;
  }

  private languageOptions(current: string) {
    const t = this.t;
    let names: Intl.DisplayNames | null = null;
    try {
      names = new Intl.DisplayNames([t.locale], { type: "language" });
    } catch {
      names = null;
    }
    const list = current === "" || LANGUAGES.includes(current) ? LANGUAGES : [current, ...LANGUAGES];
    return html`<option value="" ?selected=${current === ""}>${t.languageDefault}</option>
      ${list.map((tag) => html`<option value=${tag} ?selected=${tag === current}>${names?.of(tag) ?? tag}</option>`)}`;
  }
}
