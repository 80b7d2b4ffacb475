import {
  createInboxFeed,
  type InboxClient,
  type InboxFeed,
  type InboxFilter,
  type InboxItem,
} from "@notify/inbox-client";
import { css, html, nothing, type PropertyValues } from "lit";
import { ConnectedElement } from "./base.js";
import { relativeTime } from "./strings.js";
import { tokens } from "./styles.js";

type FeedState = InboxFeed["state"];

/** Detail of `notify-inbox:item-click`. Cancel the event to keep the item unread. */
export interface ItemClickDetail {
  item: InboxItem;
}
/** Detail of `notify-inbox:items-received`: items that arrived while the element was open in the page. */
export interface ItemsReceivedDetail {
  items: InboxItem[];
}

const BELL = html`<svg part="bell-icon" viewBox="0 0 24 24" width="22" height="22" aria-hidden="true" focusable="false">
  <path
    fill="currentColor"
    d="M12 22a2.5 2.5 0 0 0 2.45-2h-4.9A2.5 2.5 0 0 0 12 22Zm7-6V11a7 7 0 0 0-5.5-6.84V3.5a1.5 1.5 0 0 0-3 0v.66A7 7 0 0 0 5 11v5l-2 2v1h18v-1l-2-2Z"
  />
</svg>`;

const idOf = (item: InboxItem) => Number(item.id);

/**
 * `<notify-inbox>`: a bell with the unread count that opens a panel with the user's feed. Each
 * item can be marked read or unread and archived; more load as the feed is scrolled; new ones
 * arrive live and are announced politely. The panel opens with focus inside it and closes on
 * Escape (focus back on the bell) or a click elsewhere.
 *
 * @fires notify-inbox:item-click - an item was activated (click or Enter); cancelable: the default marks it read.
 * @fires notify-inbox:items-received - items arrived live.
 * @fires notify-inbox:open - the panel opened.
 * @fires notify-inbox:close - the panel closed.
 * @fires notify-inbox:error - the feed failed (detail.error).
 */
export class NotifyInbox extends ConnectedElement {
  static override properties = {
    ...ConnectedElement.properties,
    filter: { type: String },
    pageSize: { type: Number, attribute: "page-size" },
    open: { type: Boolean, reflect: true },
    state: { state: true },
    announcement: { state: true },
  };

  /** Which items the feed shows: inbox (not archived, the default), unread, archived or all. */
  declare filter: InboxFilter;
  declare pageSize: number;
  /** Whether the panel is open. */
  declare open: boolean;
  declare protected state: FeedState | null;
  declare protected announcement: string;

  private feed: InboxFeed | null = null;
  private unsubscribe: (() => void) | null = null;
  /** The newest item id known, to tell live arrivals from the first page and older pages. */
  private newest: number | null = null;
  private sawLoading = false;
  private observer: IntersectionObserver | null = null;
  /** The panel opened before the first page was in: focus goes to the newest item once it is, if still on the heading. */
  private focusFirstItem = false;
  private clock: ReturnType<typeof setInterval> | null = null;

  constructor() {
    super();
    this.filter = "inbox";
    this.pageSize = 20;
    this.open = false;
    this.state = null;
    this.announcement = "";
  }

  static override styles = [
    tokens,
    css`
      :host {
        display: inline-block;
        position: relative;
      }
      .bell {
        position: relative;
        display: inline-flex;
        align-items: center;
        justify-content: center;
        width: 40px;
        height: 40px;
        border-radius: 50%;
        border: 1px solid var(--_border);
        background: var(--_bg);
        color: var(--_text);
        cursor: pointer;
      }
      .bell:hover {
        background: var(--_surface);
      }
      .badge {
        position: absolute;
        top: -4px;
        inset-inline-end: -4px;
        min-width: 18px;
        height: 18px;
        padding: 0 5px;
        box-sizing: border-box;
        border-radius: 9px;
        background: var(--_badge);
        color: var(--_badge-text);
        font-size: 11px;
        font-weight: 700;
        line-height: 18px;
        text-align: center;
      }
      .panel {
        position: absolute;
        z-index: var(--notify-z-index, 1000);
        top: calc(100% + var(--_space));
        inset-inline-end: 0;
        width: var(--notify-panel-width, 380px);
        max-width: calc(100vw - 16px);
        display: flex;
        flex-direction: column;
        max-height: var(--notify-panel-max-height, 480px);
        background: var(--_bg);
        color: var(--_text);
        border: 1px solid var(--_border);
        border-radius: var(--_radius);
        box-shadow: var(--_shadow);
        overflow: hidden;
        animation: notify-pop 120ms ease-out;
      }
      @keyframes notify-pop {
        from {
          opacity: 0;
          transform: translateY(-4px);
        }
      }
      .header {
        display: flex;
        align-items: center;
        gap: var(--_space);
        padding: var(--_space) calc(var(--_space) * 1.5);
        border-bottom: 1px solid var(--_border);
      }
      .heading {
        margin: 0;
        font-size: 1.1em;
        font-weight: 600;
        flex: 1;
      }
      .heading:focus {
        outline: none;
      }
      .heading:focus-visible {
        outline: 2px solid var(--_focus);
      }
      .status {
        display: flex;
        align-items: center;
        gap: 6px;
        padding: calc(var(--_space) / 2) calc(var(--_space) * 1.5);
        font-size: 0.85em;
        color: var(--_muted);
        border-bottom: 1px solid var(--_border);
      }
      .dot {
        width: 8px;
        height: 8px;
        border-radius: 50%;
        background: var(--_muted);
        flex: none;
      }
      .status[data-state="open"] .dot {
        background: var(--_success);
      }
      .close {
        width: 28px;
        height: 28px;
        padding: 0;
        font-size: 18px;
        line-height: 1;
        color: var(--_muted);
      }
      .scroller {
        overflow-y: auto;
        overscroll-behavior: contain;
        flex: 1;
      }
      .feed {
        margin: 0;
        padding: 0;
      }
      .item {
        position: relative;
        display: block;
        padding: var(--_space) calc(var(--_space) * 1.5) var(--_space) calc(var(--_space) * 3);
        border-bottom: 1px solid var(--_border);
        cursor: pointer;
      }
      .item:hover {
        background: var(--_surface);
      }
      .item:focus-visible {
        outline-offset: -2px;
      }
      .item.unread {
        background: var(--_unread);
      }
      .unread-indicator {
        position: absolute;
        inset-inline-start: calc(var(--_space) * 1.25);
        top: calc(var(--_space) * 1.6);
        width: 8px;
        height: 8px;
        border-radius: 50%;
        background: var(--_accent);
      }
      .item-title {
        margin: 0;
        font-size: 1em;
        font-weight: 600;
      }
      .item.read .item-title {
        font-weight: 500;
      }
      .item-body {
        margin: 2px 0 0;
        white-space: pre-line;
        overflow-wrap: anywhere;
      }
      .item-meta {
        display: flex;
        align-items: center;
        flex-wrap: wrap;
        gap: calc(var(--_space) / 2);
        margin-top: calc(var(--_space) / 2);
      }
      .item-time {
        color: var(--_muted);
        font-size: 0.85em;
        margin-inline-end: auto;
      }
      .item-actions .text-button {
        font-size: 0.85em;
      }
      .empty,
      .loading,
      .error {
        margin: 0;
        padding: calc(var(--_space) * 3) calc(var(--_space) * 2);
        text-align: center;
        color: var(--_muted);
      }
      .empty strong {
        display: block;
        color: var(--_text);
        margin-bottom: 4px;
      }
      .error {
        color: var(--_danger);
      }
      .sentinel {
        height: 1px;
      }
      .more {
        margin: 0;
        padding: var(--_space);
        text-align: center;
        color: var(--_muted);
        font-size: 0.85em;
      }
    `,
  ];

  protected override attach(client: InboxClient): void {
    this.feed = createInboxFeed(client, { filter: this.filter, pageSize: this.pageSize });
    this.newest = null;
    this.sawLoading = false;
    this.unsubscribe = this.feed.subscribe((state) => this.onState(state));
    void this.feed.start();
    this.clock = setInterval(() => this.requestUpdate(), 60_000);
  }

  protected override detach(): void {
    this.unsubscribe?.();
    this.unsubscribe = null;
    this.feed?.stop();
    this.feed = null;
    this.state = null;
    if (this.clock) clearInterval(this.clock);
    this.clock = null;
    this.observer?.disconnect();
    this.observer = null;
  }

  override disconnectedCallback(): void {
    super.disconnectedCallback();
    document.removeEventListener("pointerdown", this.onOutside, true);
  }

  private onState(state: FeedState): void {
    if (state.loading) this.sawLoading = true;
    const newest = state.items.reduce((max, item) => Math.max(max, idOf(item)), 0);
    if (this.newest === null) {
      // The first page is what was there already: nothing to announce.
      if (!state.loading && (this.sawLoading || state.items.length > 0)) this.newest = newest;
    } else if (newest > this.newest) {
      const previous = this.newest;
      const arrived = state.items.filter((item) => idOf(item) > previous);
      this.newest = newest;
      if (arrived.length > 0) {
        this.announce(this.t.newItems(arrived.length, arrived.length === 1 ? (arrived[0]?.title ?? null) : null));
        this.emit<ItemsReceivedDetail>("notify-inbox:items-received", { items: arrived });
      }
    }
    if (state.error && state.error !== this.state?.error) this.emit("notify-inbox:error", { error: state.error });
    this.state = state;
  }

  /** The live region says it once; the same words again are said again. */
  private announce(text: string): void {
    this.announcement = "";
    requestAnimationFrame(() => {
      this.announcement = text;
    });
  }

  private get unread(): number {
    return this.state?.counts?.unread ?? 0;
  }

  /** Opens the panel and moves focus into it. */
  async show(): Promise<void> {
    if (this.open) return;
    this.open = true;
    document.addEventListener("pointerdown", this.onOutside, true);
    this.emit("notify-inbox:open", {});
    await this.updateComplete;
    const first = this.renderRoot.querySelector<HTMLElement>(".item");
    (first ?? this.renderRoot.querySelector<HTMLElement>(".heading"))?.focus();
    this.focusFirstItem = first === null;
    if ((this.state?.counts?.unseen ?? 0) > 0) void this.feed?.markAllSeen();
  }

  /** Closes the panel; focus goes back to the bell unless `restoreFocus` is false (a click elsewhere). */
  async hide(restoreFocus = true): Promise<void> {
    if (!this.open) return;
    this.open = false;
    this.focusFirstItem = false;
    document.removeEventListener("pointerdown", this.onOutside, true);
    this.emit("notify-inbox:close", {});
    await this.updateComplete;
    if (restoreFocus) this.renderRoot.querySelector<HTMLElement>(".bell")?.focus();
  }

  private readonly onOutside = (event: Event) => {
    if (!event.composedPath().includes(this)) void this.hide(false);
  };

  private onKeydown(event: KeyboardEvent): void {
    if (event.key === "Escape" && this.open) {
      event.stopPropagation();
      void this.hide();
    }
  }

  /** The feed's keys (the ARIA feed pattern): arrows and Page Up/Down move between items, Home/End to the ends, Enter opens one. */
  private onFeedKeydown(event: KeyboardEvent): void {
    const items = [...this.renderRoot.querySelectorAll<HTMLElement>(".item")];
    const current = (event.target as HTMLElement).closest<HTMLElement>(".item");
    if (!current) return;
    const index = items.indexOf(current);
    let next: HTMLElement | undefined;
    switch (event.key) {
      case "ArrowDown":
      case "PageDown":
        next = items[index + 1];
        break;
      case "ArrowUp":
      case "PageUp":
        next = items[index - 1];
        break;
      case "Home":
        next = items[0];
        break;
      case "End":
        next = items.at(-1);
        break;
      case "Enter":
      case " ":
        if (event.target === current) {
          event.preventDefault();
          const item = this.state?.items[index];
          if (item) this.activate(item);
        }
        return;
      default:
        return;
    }
    event.preventDefault();
    next?.focus();
  }

  private activate(item: InboxItem): void {
    const proceed = this.emit<ItemClickDetail>("notify-inbox:item-click", { item }, true);
    if (proceed && item.read_at === null) void this.feed?.markRead(item.id, true);
  }

  private onItemClick(event: MouseEvent, item: InboxItem): void {
    // The item's own buttons do their own thing.
    if ((event.target as HTMLElement).closest("button")) return;
    this.activate(item);
  }

  private retry(): void {
    const client = this.inboxClient;
    if (!client) return;
    this.detach();
    this.attach(client);
  }

  protected override updated(changed: PropertyValues<this>): void {
    super.updated(changed);
    if (changed.has("filter") || changed.has("pageSize")) {
      if (changed.get("filter") !== undefined || changed.get("pageSize") !== undefined) this.retry();
    }
    this.watchEnd();
    if (this.focusFirstItem) {
      const first = this.renderRoot.querySelector<HTMLElement>(".item");
      if (first) {
        this.focusFirstItem = false;
        const heading = this.renderRoot.querySelector<HTMLElement>(".heading");
        if ((this.renderRoot as ShadowRoot).activeElement === heading) first.focus();
      }
    }
  }

  /** More items load when the end of the feed scrolls into view (the observer is renewed after each page). */
  private watchEnd(): void {
    const sentinel = this.renderRoot.querySelector<HTMLElement>(".sentinel");
    this.observer?.disconnect();
    this.observer = null;
    if (!sentinel || !this.open || !this.state?.hasMore || this.state.loading) return;
    const root = this.renderRoot.querySelector<HTMLElement>(".scroller");
    this.observer = new IntersectionObserver(
      (entries) => {
        if (entries.some((entry) => entry.isIntersecting) && this.state?.hasMore && !this.state.loading) {
          void this.feed?.loadMore();
        }
      },
      { root, rootMargin: "0px 0px 120px 0px" },
    );
    this.observer.observe(sentinel);
  }

  override render() {
    const t = this.t;
    const unread = this.unread;
    const badge = unread > 99 ? t.badgeOverflow : String(unread);
    return html`<div class="root" lang=${t.locale} @keydown=${this.onKeydown}>
      <button
        part="bell"
        class="bell"
        type="button"
        aria-label=${t.bellLabel(unread)}
        aria-haspopup="dialog"
        aria-expanded=${this.open ? "true" : "false"}
        aria-controls="panel"
        @click=${() => (this.open ? this.hide() : this.show())}
      >
        ${BELL}${unread > 0 ? html`<span part="badge" class="badge" aria-hidden="true">${badge}</span>` : nothing}
      </button>
      <div
        part="panel"
        class="panel"
        id="panel"
        role="dialog"
        aria-labelledby="heading"
        ?hidden=${!this.open}
      >
        ${this.open ? this.renderPanel() : nothing}
      </div>
      <div class="visually-hidden" role="status" aria-live="polite" aria-atomic="true">${this.announcement}</div>
    </div>`;
  }

  private renderPanel() {
    const t = this.t;
    const state = this.state;
    const connection = state?.connection ?? "connecting";
    return html`<div part="header" class="header">
        <h2 part="heading" class="heading" id="heading" tabindex="-1">${t.panelTitle}</h2>
        <button
          part="action action-mark-all-read"
          class="text-button"
          type="button"
          ?disabled=${this.unread === 0}
          @click=${() => this.feed?.markAllRead()}
        >
          ${t.markAllRead}
        </button>
        <button
          part="action action-close"
          class="text-button close"
          type="button"
          aria-label=${t.closePanel}
          @click=${() => this.hide()}
        >
          <span aria-hidden="true">×</span>
        </button>
      </div>
      <div part="connection" class="status" data-state=${connection} role="status">
        <span class="dot" aria-hidden="true"></span>${t.connection[connection]}
      </div>
      <div class="scroller">${this.renderFeed(state)}</div>`;
  }

  private renderFeed(state: FeedState | null) {
    const t = this.t;
    if (!state || (state.items.length === 0 && state.loading)) {
      return html`<p part="loading" class="loading" role="status">${t.loading}</p>`;
    }
    if (state.items.length === 0 && state.error) {
      return html`<div part="error" class="error" role="alert">
        <p>${t.loadError}</p>
        <button part="action action-retry" class="text-button" type="button" @click=${() => this.retry()}>
          ${t.retry}
        </button>
      </div>`;
    }
    if (state.items.length === 0) {
      return html`<p part="empty" class="empty"><strong>${t.empty}</strong>${t.emptyHint}</p>`;
    }
    const size = state.hasMore ? -1 : state.items.length;
    const now = Date.now();
    return html`<div
        part="feed"
        class="feed"
        role="feed"
        aria-labelledby="heading"
        aria-busy=${state.loading ? "true" : "false"}
        @keydown=${this.onFeedKeydown}
      >
        ${state.items.map((item, index) => this.renderItem(item, index, size, now))}
      </div>
      ${state.hasMore ? html`<div class="sentinel" aria-hidden="true"></div>` : nothing}
      ${state.loading ? html`<p part="loading-more" class="more">${t.loadingMore}</p>` : nothing}
      ${
        state.error
          ? html`<div part="error" class="error" role="alert">
            <p>${t.loadError}</p>
            <button part="action action-retry" class="text-button" type="button" @click=${() => this.retry()}>
              ${t.retry}
            </button>
          </div>`
          : nothing
      }`;
  }

  private renderItem(item: InboxItem, index: number, size: number, now: number) {
    const t = this.t;
    const unread = item.read_at === null;
    const archived = item.archived_at !== null;
    const titleId = `item-${item.id}-title`;
    const bodyId = `item-${item.id}-body`;
    return html`<article
      part=${unread ? "item item-unread" : "item item-read"}
      class=${unread ? "item unread" : "item read"}
      tabindex="0"
      aria-posinset=${index + 1}
      aria-setsize=${size}
      aria-labelledby=${titleId}
      aria-describedby=${bodyId}
      data-item-id=${item.id}
      @click=${(event: MouseEvent) => this.onItemClick(event, item)}
    >
      ${
        unread
          ? html`<span part="unread-indicator" class="unread-indicator"></span
            ><span class="visually-hidden">${t.unreadMarker}: </span>`
          : nothing
      }
      <h3 part="item-title" class="item-title" id=${titleId}>${item.title ?? t.untitled}</h3>
      <p part="item-body" class="item-body" id=${bodyId}>${item.body}</p>
      <div class="item-meta">
        <time part="item-time" class="item-time" datetime=${item.created_at} title=${new Date(item.created_at).toLocaleString(t.locale)}
          >${relativeTime(t.locale, item.created_at, now)}</time
        >
        <span part="item-actions" class="item-actions">
          <button
            part=${unread ? "action action-read" : "action action-unread"}
            class="text-button"
            type="button"
            @click=${() => this.feed?.markRead(item.id, unread)}
          >
            ${unread ? t.markRead : t.markUnread}
          </button>
          <button
            part=${archived ? "action action-unarchive" : "action action-archive"}
            class="text-button"
            type="button"
            @click=${() => this.archiveItem(item, !archived)}
          >
            ${archived ? t.unarchive : t.archive}
          </button>
        </span>
      </div>
    </article>`;
  }

  /** Archives (or restores) an item; focus moves to its neighbour when it leaves the list. */
  private async archiveItem(item: InboxItem, archived: boolean): Promise<void> {
    const items = [...this.renderRoot.querySelectorAll<HTMLElement>(".item")];
    const at = items.findIndex((el) => el.dataset.itemId === item.id);
    const neighbour = items[at + 1] ?? items[at - 1];
    await this.feed?.archive(item.id, archived);
    await this.updateComplete;
    if (neighbour?.isConnected) neighbour.focus();
    else if (!this.renderRoot.querySelector(`[data-item-id="${item.id}"]`)) {
      this.renderRoot.querySelector<HTMLElement>(".heading")?.focus();
    }
  }
}
