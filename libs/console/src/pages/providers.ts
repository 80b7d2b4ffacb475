import { html } from "hono/html";
import { type ConsoleContext, render, statusOf } from "../context.js";
import { type Html, problemBox, refreshSeconds, show, statusText, when } from "../layout.js";
import type { LaneView, ProviderView } from "../views.js";

const LANES = ["transactional", "promotional"] as const;

const lane = (view: LaneView | undefined) =>
  view === undefined
    ? "—"
    : `${show(view.rate_per_second)}/s, burst ${show(view.burst)}, ${show(view.waiting)} waiting`;

const tokens = (value: ProviderView["tokens"]) =>
  value === null || value === undefined
    ? "— (no worker reports it)"
    : LANES.map((l) => `${l} ${typeof value[l] === "number" ? Math.floor(value[l]) : "—"}`).join(", ");

/** Each provider's shared breaker, the tokens left in its shared bucket, and what each worker reports. */
export function providersTable(providers: readonly ProviderView[]): Html {
  return html`<table data-testid="providers">
<thead><tr><th>Provider</th><th>Channel</th><th>Breaker</th><th>Last shared decision</th><th>Decided at</th><th>Tokens now</th><th>Workers</th></tr></thead>
<tbody>${providers.map(
    (p) => html`<tr data-testid="provider-${p.provider}">
<td>${p.provider}</td><td>${show(p.channel)}</td>
<td data-testid="breaker-${p.provider}">${statusText(p.breaker?.state, "state")}</td>
<td>${p.breaker?.decided ? html`${p.breaker.decided} by ${show(p.breaker.decided_by)}` : "—"}</td><td>${when(p.breaker?.decided_at)}</td><td>${tokens(p.tokens)}</td>
<td>${
      (p.workers ?? []).length === 0
        ? html`<span class="muted">none reporting</span>`
        : html`<table><tbody>${(p.workers ?? []).map(
            (
              w,
            ) => html`<tr data-testid="worker-${p.provider}-${w.worker}"><td class="mono">${w.worker}</td><td>${statusText(w.breaker, "state")}</td>
<td>${LANES.map((l) => html`${l}: ${lane(w.lanes?.[l])}<br>`)}</td><td>${when(w.reported_at)}</td></tr>`,
          )}</tbody></table>`
    }</td></tr>`,
  )}</tbody></table>`;
}

/** GET /console/providers[?refresh=N] */
export async function providersPage(c: ConsoleContext): Promise<Response> {
  const refresh = refreshSeconds(c.req.query("refresh"));
  const found = await c.get("operator").api.get<{ data: ProviderView[] }>("/ops/providers");
  const controls = html`<p class="muted">A breaker is open when any live worker reports it open. ${
    refresh === undefined
      ? html`<a href="/console/providers?refresh=5">Reload every 5 s</a>`
      : html`Reloading every ${refresh} s. <a href="/console/providers">Stop</a>`
  }</p>`;
  const options = {
    title: "Providers",
    current: "/console/providers" as const,
    ...(refresh === undefined ? {} : { refresh }),
  };
  if (!found.ok) {
    return render(
      c,
      { ...options, body: html`${controls}${problemBox(found.problem)}` },
      statusOf(found.problem.status),
    );
  }
  return render(c, { ...options, body: html`${controls}${providersTable(found.body.data)}` });
}
