import { html } from "hono/html";
import { queryString } from "../api.js";
import {
  type ConsoleContext,
  csrfOf,
  type Form,
  field,
  formOf,
  type PageStatus,
  render,
  statusOf,
} from "../context.js";
import { type Html, problemBox, show, when } from "../layout.js";
import type { SuppressionView } from "../views.js";

// As the API takes them (docs/api.md, Suppressions).
const CHANNELS = ["email", "sms"] as const;
const REASONS = ["hard_bounce", "spam_complaint", "unsubscribe", "carrier_opt_out", "manual"] as const;
const SCOPES = ["all_clients", "client"] as const;
const MAX_NOTE = 500;

const PAGE = "/console/suppressions";
const OPTIONS = { title: "Suppressions", current: "/console/suppressions" as const };

const FILTERS = ["address", "channel", "reason", "client"] as const;
type Filters = Partial<Record<(typeof FILTERS)[number], string>>;

/** The list's filters, from the query string or from a form's `f_` fields (to go back to the same list). */
function filtersOf(read: (name: string) => string | undefined): Filters {
  const filters: Filters = {};
  for (const name of FILTERS) {
    const value = read(name)?.trim();
    if (value) filters[name] = value;
  }
  return filters;
}

const listUrl = (filters: Filters, cursor?: string) => `${PAGE}${queryString({ ...filters, cursor })}`;

function select(name: string, values: readonly string[], selected: string | undefined, any?: string): Html {
  return html`<select name="${name}" data-testid="suppression-${name}">${any === undefined ? "" : html`<option value="">${any}</option>`}${values.map(
    (value) => html`<option value="${value}"${value === selected ? html` selected` : ""}>${value}</option>`,
  )}</select>`;
}

function searchForm(filters: Filters): Html {
  return html`<form class="filters" method="get" action="${PAGE}" data-testid="suppressions-search">
<label>Address or its start <input name="address" value="${filters.address ?? ""}" size="30" data-testid="suppression-search-address"></label>
<label>Channel ${select("channel", CHANNELS, filters.channel, "any")}</label>
<label>Reason ${select("reason", REASONS, filters.reason, "any")}</label>
<label>Client <input name="client" value="${filters.client ?? ""}" placeholder="every client" data-testid="suppression-search-client"></label>
<button type="submit" data-testid="suppressions-search-submit">Search</button>
</form>`;
}

function addForm(c: ConsoleContext): Html {
  return html`<h2>Suppress an address</h2>
<form class="filters" method="post" action="${PAGE}/add" data-testid="suppression-add">
<input type="hidden" name="csrf" value="${csrfOf(c)}">
<label>Channel ${select("channel", CHANNELS, "email")}</label>
<label>Address <input name="address" required maxlength="320" size="30" data-testid="suppression-add-address"></label>
<label>Reason ${select("reason", REASONS, "manual")}</label>
<label>Note <input name="note" maxlength="${MAX_NOTE}" size="30" data-testid="suppression-add-note"></label>
<label>Scope <select name="scope" data-testid="suppression-add-scope"><option value="all_clients" selected>every client</option><option value="client">this key's client only</option></select></label>
<button type="submit" data-testid="suppression-add-submit">Suppress</button>
</form>`;
}

/** What put an entry on the list: a provider's event, the notification it was about, or a key. */
function sourceOf(entry: SuppressionView): Html {
  const source = entry.source ?? {};
  const parts: Html[] = [];
  if (source.provider !== undefined || source.event !== undefined) {
    parts.push(html`${[source.provider, source.event].filter((p) => p !== undefined).join(" ")}`);
  }
  if (source.event_id !== undefined) parts.push(html`event <span class="mono">${source.event_id}</span>`);
  if (source.notification_id !== undefined) {
    parts.push(
      html`<a class="mono" href="/console/notifications/${encodeURIComponent(source.notification_id)}">${source.notification_id}</a>`,
    );
  }
  if (source.key_id !== undefined) parts.push(html`key <span class="mono">${source.key_id}</span>`);
  return parts.length === 0 ? html`—` : html`${parts.map((part, i) => html`${i > 0 ? " · " : ""}${part}`)}`;
}

function removeForm(c: ConsoleContext, entry: SuppressionView, filters: Filters): Html {
  return html`<form class="inline" method="post" action="${PAGE}/remove">
<input type="hidden" name="csrf" value="${csrfOf(c)}"><input type="hidden" name="channel" value="${entry.channel}"><input type="hidden" name="address" value="${entry.address}"><input type="hidden" name="scope" value="${entry.scope ?? "client"}"><input type="hidden" name="client_id" value="${entry.client_id ?? ""}">${FILTERS.map(
    (name) =>
      filters[name] === undefined ? "" : html`<input type="hidden" name="f_${name}" value="${filters[name]}">`,
  )}<input name="note" maxlength="${MAX_NOTE}" size="20" placeholder="why (optional)" aria-label="Why remove it" data-testid="suppression-remove-note"> <button type="submit" class="danger" data-testid="suppression-remove">Remove</button></form>`;
}

function entriesTable(c: ConsoleContext, entries: readonly SuppressionView[], filters: Filters): Html {
  return html`<table data-testid="suppressions">
<thead><tr><th>Channel</th><th>Address</th><th>Holds for</th><th>Reason</th><th>Source</th><th>Note</th><th>Added</th><th></th></tr></thead>
<tbody>${entries.map(
    (e) => html`<tr data-testid="suppression-entry">
<td>${show(e.channel)}</td><td class="mono">${show(e.address)}</td>
<td>${e.scope === "all_clients" ? html`every client` : html`client ${show(e.client_id)}`}</td>
<td>${show(e.reason)}</td><td>${sourceOf(e)}</td><td>${show(e.source?.note)}</td><td>${when(e.created_at)}</td>
<td>${removeForm(c, e, filters)}</td></tr>`,
  )}</tbody></table>`;
}

const INTRO = html`<p class="muted">Addresses nothing is sent to on a channel. Providers' reports (hard bounces, spam
complaints, unsubscribes, carrier opt-outs, STOP) hold for every client; a client's own entries hold for it only and are
lifted by that client. <code>notify suppressions export</code> and <code>import</code> move the list as CSV.</p>`;

/** GET /console/suppressions?address=&channel=&reason=&client=&cursor= : the list, newest first. */
export async function suppressionsPage(c: ConsoleContext): Promise<Response> {
  const filters = filtersOf((name) => c.req.query(name));
  const cursor = c.req.query("cursor") || undefined;
  const found = await c
    .get("operator")
    .api.get<{ data: SuppressionView[]; next_cursor: string | null }>("/suppressions", {
      channel: filters.channel,
      reason: filters.reason,
      address_prefix: filters.address,
      client: filters.client ?? "*",
      cursor,
      limit: "100",
    });
  const head = html`${INTRO}${searchForm(filters)}`;
  if (!found.ok) {
    return render(
      c,
      { ...OPTIONS, body: html`${head}${problemBox(found.problem)}${addForm(c)}` },
      statusOf(found.problem.status),
    );
  }
  const { data, next_cursor: next } = found.body;
  const pager =
    cursor === undefined && next === null
      ? ""
      : html`<p class="muted">${cursor === undefined ? "" : html`<a href="${listUrl(filters)}">Newest</a> `}${
          next === null ? "" : html`<a href="${listUrl(filters, next)}" data-testid="suppressions-older">Older</a>`
        }</p>`;
  const table =
    data.length === 0
      ? html`<p data-testid="no-suppressions">No entry matches.</p>`
      : html`${entriesTable(c, data, filters)}${pager}`;
  return render(c, { ...OPTIONS, body: html`${head}${table}${addForm(c)}` });
}

/**
 * The address as one path segment. "." and ".." are refused: a URL resolves them as a path, so
 * they would name another route of the API.
 */
function segment(value: string): string | undefined {
  return value === "." || value === ".." ? undefined : encodeURIComponent(value);
}

function refused(c: ConsoleContext, message: string, status: PageStatus): Promise<Response> {
  return render(
    c,
    {
      ...OPTIONS,
      body: html`<p class="error" data-testid="error" role="alert">${message}</p><p><a href="${PAGE}">Back</a></p>`,
    },
    status,
  );
}

const oneOf = <T extends string>(values: readonly T[], value: string): value is T =>
  (values as readonly string[]).includes(value);

/** POST /console/suppressions/add : PUT /api/v1/suppressions/{channel}/{address}, then the address's entries. */
export async function suppressionAddAction(c: ConsoleContext): Promise<Response> {
  const form = await formOf(c);
  const channel = field(form, "channel");
  const address = field(form, "address").trim();
  const reason = field(form, "reason") || "manual";
  const note = field(form, "note").trim();
  const scope = field(form, "scope") || "all_clients";
  const path = segment(address);
  if (!oneOf(CHANNELS, channel)) return refused(c, `Channel must be one of ${CHANNELS.join(", ")}.`, 400);
  if (address === "" || path === undefined) return refused(c, "An address is required.", 400);
  const done = await c
    .get("operator")
    .api.put<SuppressionView>(`/suppressions/${channel}/${path}`, { reason, scope, ...(note ? { note } : {}) });
  if (!done.ok) {
    return render(
      c,
      { ...OPTIONS, body: html`${problemBox(done.problem)}<p><a href="${PAGE}">Back</a></p>` },
      statusOf(done.problem.status),
    );
  }
  const entry = done.body;
  const session = c.get("operator").session;
  if (session !== undefined) {
    session.notice =
      done.status === 201
        ? `${entry.channel} ${entry.address} suppressed (${show(entry.reason)}).`
        : `${entry.channel} ${entry.address} was on the list already (${show(entry.reason)}); the first entry is kept.`;
  }
  return c.redirect(listUrl({ address: entry.address, channel: entry.channel }), 303);
}

/**
 * POST /console/suppressions/remove : DELETE /api/v1/suppressions/{channel}/{address}?scope=&note=,
 * then back to the list. The note (why the entry is lifted) is the API's to check and to log with
 * the operator's key.
 */
export async function suppressionRemoveAction(c: ConsoleContext): Promise<Response> {
  const form: Form = await formOf(c);
  const channel = field(form, "channel");
  const address = field(form, "address");
  const scope = field(form, "scope");
  const clientId = field(form, "client_id");
  const note = field(form, "note").trim();
  const filters = filtersOf((name) => field(form, `f_${name}`));
  const path = segment(address);
  if (!oneOf(CHANNELS, channel) || address === "" || path === undefined || !oneOf(SCOPES, scope)) {
    return refused(c, "The form names no entry: reload the list and try again.", 400);
  }
  const done = await c
    .get("operator")
    .api.delete(`/suppressions/${channel}/${path}`, { scope, ...(note ? { note } : {}) });
  if (!done.ok) {
    // An operator key lifts the entries for every client and its own client's; a client lifts its own.
    const whose =
      done.problem.status === 404 && scope === "client" && clientId !== ""
        ? html`<p class="muted" data-testid="suppression-client-hint">Client ${clientId}'s own entry is lifted by that client through the API, or with <code>notify suppressions remove ${channel} ${address} --client ${clientId}</code>.</p>`
        : "";
    return render(
      c,
      { ...OPTIONS, body: html`${problemBox(done.problem)}${whose}<p><a href="${listUrl(filters)}">Back</a></p>` },
      statusOf(done.problem.status),
    );
  }
  const session = c.get("operator").session;
  if (session !== undefined) {
    session.notice = `${channel} ${address} removed from ${scope === "all_clients" ? "every client's" : "this key's client's"} list.`;
  }
  return c.redirect(listUrl(filters), 303);
}
