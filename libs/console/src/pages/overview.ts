import { html } from "hono/html";
import type { ApiResult } from "../api.js";
import { type ConsoleContext, render } from "../context.js";
import { type Html, problemBox, show, statusText } from "../layout.js";
import type { BroadcastView, DeadLetterSummary, Page, ProviderView, StreamView } from "../views.js";
import { searchForm } from "./search.js";

/** A card of the overview: its own error when its call failed, so one outage blanks one card only. */
function card<T>(
  title: string,
  href: string,
  testid: string,
  result: ApiResult<T>,
  show: (body: T) => Html,
  wide = false,
): Html {
  return html`<section class="${wide ? "card wide" : "card"}" data-testid="${testid}"><h2><a href="${href}">${title}</a></h2>${
    result.ok ? show(result.body) : problemBox(result.problem)
  }</section>`;
}

function backlog(body: { data: StreamView[] }): Html {
  const busy = body.data.flatMap((s) =>
    (s.consumers ?? [])
      .filter((k) => (k.num_pending ?? 0) + (k.num_ack_pending ?? 0) > 0)
      .map((k) => ({ stream: s.name, consumer: k.name, pending: k.num_pending ?? 0, acks: k.num_ack_pending ?? 0 })),
  );
  if (busy.length === 0) return html`<p>No backlog: every consumer is caught up (${body.data.length} streams).</p>`;
  return html`<table><thead><tr><th>Stream</th><th>Consumer</th><th class="num">Pending</th><th class="num">Ack pending</th></tr></thead>
<tbody>${busy.map(
    (b) =>
      html`<tr><td>${b.stream}</td><td>${b.consumer}</td><td class="num">${b.pending}</td><td class="num">${b.acks}</td></tr>`,
  )}</tbody></table>`;
}

function breakers(body: { data: ProviderView[] }): Html {
  if (body.data.length === 0) return html`<p class="muted">No provider reported yet.</p>`;
  return html`<table><tbody>${body.data.map(
    (p) =>
      html`<tr><td>${p.provider}</td><td>${show(p.channel)}</td><td data-testid="summary-breaker-${p.provider}">${statusText(p.breaker?.state, "state")}</td></tr>`,
  )}</tbody></table>`;
}

function inProgress(body: Page<BroadcastView>): Html {
  if (body.data.length === 0) return html`<p>None in progress.</p>`;
  return html`<table><tbody>${body.data.map(
    (b) =>
      html`<tr><td class="mono">${b.broadcast_id}</td><td>${show(b.client_id)}</td><td>${statusText(b.status)}</td><td>${show(b.expanded)} / ${show(b.total)}</td></tr>`,
  )}</tbody></table>`;
}

/** GET /console: the search, and what needs an operator's eye now. */
export async function overviewPage(c: ConsoleContext): Promise<Response> {
  const { api } = c.get("operator");
  const [streams, providers, letters, expanding, paused] = await Promise.all([
    api.get<{ data: StreamView[] }>("/ops/streams"),
    api.get<{ data: ProviderView[] }>("/ops/providers"),
    api.get<Page<DeadLetterSummary>>("/dead-letters", { page_size: "1" }),
    api.get<Page<BroadcastView>>("/ops/broadcasts", { status: "expanding", page_size: "20" }),
    api.get<Page<BroadcastView>>("/ops/broadcasts", { status: "paused", page_size: "20" }),
  ]);
  // Both halves of "in progress" in one card: expanding and paused.
  const broadcasts: ApiResult<Page<BroadcastView>> = !expanding.ok
    ? expanding
    : !paused.ok
      ? paused
      : { ok: true, status: 200, body: { data: [...expanding.body.data, ...paused.body.data] } };
  const body = html`${searchForm()}
<div class="cards">
${card("Streams with backlog", "/console/streams", "summary-streams", streams, backlog, true)}
${card("Provider breakers", "/console/providers", "summary-providers", providers, breakers)}
${card("Dead letters", "/console/dead-letters", "summary-dead-letters", letters, (page) => html`<p><strong data-testid="dead-letter-total">${page.total_count ?? page.data.length}</strong> kept (30 days).</p>`)}
${card("Broadcasts in progress", "/console/broadcasts", "summary-broadcasts", broadcasts, inProgress)}
</div>`;
  return render(c, { title: "Overview", current: "/console", body });
}
