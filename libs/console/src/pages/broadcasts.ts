import { html } from "hono/html";
import { queryString } from "../api.js";
import { type ConsoleContext, csrfOf, render, statusOf } from "../context.js";
import { type Html, problemBox, show, statusText, when } from "../layout.js";
import type { BroadcastView, Page } from "../views.js";

const STATUSES = ["expanding", "paused", "expanded", "cancelled"] as const;
export const BROADCAST_ACTIONS = ["pause", "resume", "cancel"] as const;
export type BroadcastAction = (typeof BROADCAST_ACTIONS)[number];

/** The actions that change something for a broadcast in this status. */
function actionsFor(status: string | undefined): BroadcastAction[] {
  if (status === "expanding") return ["pause", "cancel"];
  if (status === "paused") return ["resume", "cancel"];
  return [];
}

function actionForm(c: ConsoleContext, id: string, action: BroadcastAction): Html {
  const label = { pause: "Pause", resume: "Resume", cancel: "Cancel" }[action];
  return html`<form class="inline" method="post" action="/console/broadcasts/${encodeURIComponent(id)}/${action}">
<input type="hidden" name="csrf" value="${csrfOf(c)}"><button type="submit"${action === "cancel" ? html` class="danger"` : ""} data-testid="${action}-${id}">${label}</button></form>`;
}

function broadcastsTable(c: ConsoleContext, rows: readonly BroadcastView[]): Html {
  return html`<table data-testid="broadcasts">
<thead><tr><th>Broadcast</th><th>Client</th><th>Audience</th><th>Category</th><th>Template</th><th>Status</th><th>Progress</th>
<th class="num">Delivered</th><th class="num">Suppressed</th><th class="num">Failed</th><th>Created</th><th>Finished</th><th></th></tr></thead>
<tbody>${rows.map(
    (b) => html`<tr data-testid="broadcast-${b.broadcast_id}">
<td class="mono">${b.broadcast_id}</td><td>${show(b.client_id)}</td><td>${show(b.audience_id)}</td><td>${show(b.category)}</td><td>${show(b.template_id)}</td>
<td data-testid="broadcast-status-${b.broadcast_id}">${statusText(b.status)}</td>
<td><progress value="${b.expanded ?? 0}" max="${Math.max(1, b.total ?? 0)}"></progress> ${show(b.expanded)} / ${show(b.total)}</td>
<td class="num">${show(b.delivered)}</td><td class="num">${show(b.suppressed)}</td><td class="num">${show(b.failed)}</td>
<td>${when(b.created_at)}</td><td>${when(b.finished_at)}</td>
<td>${actionsFor(b.status).map((action) => actionForm(c, b.broadcast_id, action))}</td></tr>`,
  )}</tbody></table>`;
}

/** GET /console/broadcasts?status=&page= : every client's broadcasts, newest first. */
export async function broadcastsPage(c: ConsoleContext): Promise<Response> {
  const status = c.req.query("status") || undefined;
  const page = c.req.query("page") ?? "1";
  const filter = html`<form class="filters" method="get" action="/console/broadcasts">
<label>Status <select name="status" data-testid="filter-status"><option value="">any</option>${STATUSES.map(
    (s) => html`<option value="${s}"${s === status ? html` selected` : ""}>${s}</option>`,
  )}</select></label><button type="submit">Filter</button></form>`;
  const found = await c
    .get("operator")
    .api.get<Page<BroadcastView>>("/ops/broadcasts", { status, page, page_size: "50" });
  const options = { title: "Broadcasts", current: "/console/broadcasts" as const };
  if (!found.ok)
    return render(c, { ...options, body: html`${filter}${problemBox(found.problem)}` }, statusOf(found.problem.status));
  const { data, total_count: total = data.length, page: at = 1, page_size: size = data.length } = found.body;
  const link = (n: number) => `/console/broadcasts${queryString({ status, page: String(n) })}`;
  const pager = html`<p class="muted">${total} broadcast${total === 1 ? "" : "s"}. ${at > 1 ? html`<a href="${link(at - 1)}">Newer</a> ` : ""}${
    at * size < total ? html`<a href="${link(at + 1)}">Older</a>` : ""
  }</p>`;
  const table =
    data.length === 0 ? html`<p data-testid="no-broadcasts">No broadcast matches.</p>` : broadcastsTable(c, data);
  return render(c, { ...options, body: html`${filter}${pager}${table}` });
}

/** POST /console/broadcasts/:id/(pause|resume|cancel), then back to the list with what it did. */
export async function broadcastAction(c: ConsoleContext, action: BroadcastAction): Promise<Response> {
  const id = c.req.param("id") ?? "";
  const done = await c.get("operator").api.post<BroadcastView>(`/ops/broadcasts/${encodeURIComponent(id)}/${action}`);
  if (!done.ok) {
    return render(
      c,
      {
        title: "Broadcasts",
        current: "/console/broadcasts",
        body: html`${problemBox(done.problem)}<p><a href="/console/broadcasts">Back</a></p>`,
      },
      statusOf(done.problem.status),
    );
  }
  const session = c.get("operator").session;
  if (session !== undefined) session.notice = `Broadcast ${id}: ${action} done, now ${show(done.body.status)}.`;
  return c.redirect("/console/broadcasts", 303);
}
