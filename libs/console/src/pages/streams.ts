import { html } from "hono/html";
import { type ConsoleContext, render, statusOf } from "../context.js";
import { type Html, problemBox, refreshSeconds, show, when } from "../layout.js";
import type { StreamView } from "../views.js";

const count = (value: unknown) => (typeof value === "number" ? value.toLocaleString("en-US") : "—");

/** Each stream with its consumers' backlog. */
export function streamsTable(streams: readonly StreamView[]): Html {
  return html`<table data-testid="streams">
<thead><tr><th>Stream / consumer</th><th>Subjects / filter</th><th class="num">Messages</th><th class="num">Bytes</th><th class="num">First seq</th><th class="num">Last seq</th>
<th class="num">Pending</th><th class="num">Ack pending</th><th class="num">Redelivered</th><th class="num">Waiting</th><th>Last active</th></tr></thead>
<tbody>${streams.map(
    (
      s,
    ) => html`<tr data-testid="stream-${s.name}"><th>${s.name}</th><td class="mono">${(s.subjects ?? []).join(" ")}</td>
<td class="num">${count(s.messages)}</td><td class="num">${count(s.bytes)}</td><td class="num">${count(s.first_seq)}</td><td class="num">${count(s.last_seq)}</td>
<td class="num">${count((s.consumers ?? []).reduce((sum, k) => sum + (k.num_pending ?? 0), 0))}</td><td colspan="4"></td></tr>
${(s.consumers ?? []).map(
  (
    k,
  ) => html`<tr data-testid="consumer-${s.name}-${k.name}"><td>&nbsp;&nbsp;${k.name}</td><td class="mono">${show(k.filter_subject)}</td>
<td colspan="4"></td><td class="num" data-testid="pending-${s.name}-${k.name}">${count(k.num_pending)}</td><td class="num">${count(k.num_ack_pending)}</td>
<td class="num">${count(k.num_redelivered)}</td><td class="num">${count(k.num_waiting)}</td><td>${when(k.last_active)}</td></tr>`,
)}`,
  )}</tbody></table>`;
}

/** GET /console/streams[?refresh=N] */
export async function streamsPage(c: ConsoleContext): Promise<Response> {
  const refresh = refreshSeconds(c.req.query("refresh"));
  const found = await c.get("operator").api.get<{ data: StreamView[] }>("/ops/streams");
  const controls = html`<p class="muted">Pending: messages a consumer has not been handed yet; ack pending: handed, not yet acknowledged.
${refresh === undefined ? html`<a href="/console/streams?refresh=5">Reload every 5 s</a>` : html`Reloading every ${refresh} s. <a href="/console/streams">Stop</a>`}</p>`;
  const options = {
    title: "Streams",
    current: "/console/streams" as const,
    ...(refresh === undefined ? {} : { refresh }),
  };
  if (!found.ok)
    return render(
      c,
      { ...options, body: html`${controls}${problemBox(found.problem)}` },
      statusOf(found.problem.status),
    );
  return render(c, { ...options, body: html`${controls}${streamsTable(found.body.data)}` });
}
