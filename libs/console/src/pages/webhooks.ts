import { html } from "hono/html";
import { type ConsoleContext, render, statusOf } from "../context.js";
import { type Html, problemBox, show, statusText, when } from "../layout.js";
import type { WebhookEndpointView } from "../views.js";

const latency = (p50: number | null | undefined, p95: number | null | undefined) =>
  p50 === null || p50 === undefined ? "—" : `${p50} / ${show(p95)} ms`;

/** Every client's webhook endpoints, each with its status, backlog, dead letters and last hour. */
export function webhooksTable(endpoints: readonly WebhookEndpointView[]): Html {
  return html`<table data-testid="webhook-endpoints">
<thead><tr><th>Endpoint</th><th>Client</th><th>URL</th><th>Status</th><th>Failing since</th>
<th class="num">Backlog</th><th class="num">Dead</th><th class="num">Posts (1 h)</th><th class="num">Failed (1 h)</th><th>Latency p50 / p95</th></tr></thead>
<tbody>${endpoints.map(
    (e) => html`<tr data-testid="webhook-${e.id}">
<td class="mono">${e.id}</td><td>${show(e.client_id)}</td><td class="mono">${show(e.url)}</td>
<td data-testid="webhook-status-${e.id}">${statusText(e.status)}${
      e.status === "disabled"
        ? html` <span class="muted">(${e.disabled_reason === "failing" ? "every attempt failed for too long" : "by its client"}, ${when(e.disabled_at)})</span>`
        : ""
    }</td>
<td>${when(e.failing_since)}</td>
<td class="num">${show(e.figures?.backlog)}</td><td class="num">${show(e.figures?.dead)}</td>
<td class="num">${show(e.figures?.last_hour?.attempts)}</td><td class="num">${show(e.figures?.last_hour?.failed)}</td>
<td>${latency(e.figures?.last_hour?.latency_ms_p50, e.figures?.last_hour?.latency_ms_p95)}</td></tr>`,
  )}</tbody></table>`;
}

/** GET /console/webhooks */
export async function webhooksPage(c: ConsoleContext): Promise<Response> {
  const found = await c.get("operator").api.get<{ data: WebhookEndpointView[] }>("/ops/webhook-endpoints");
  const options = { title: "Webhooks", current: "/console/webhooks" as const };
  const intro = html`<p class="muted">Clients' outbound webhook endpoints. A disabled endpoint's dead letters are listed by
<code>notify webhooks dead ID</code> and posted again by <code>notify webhooks replay ID</code>.</p>`;
  if (!found.ok) {
    return render(c, { ...options, body: html`${intro}${problemBox(found.problem)}` }, statusOf(found.problem.status));
  }
  const disabled = found.body.data.filter((e) => e.status === "disabled" && e.disabled_reason === "failing");
  const alert =
    disabled.length === 0
      ? ""
      : html`<p class="error" data-testid="webhooks-disabled" role="alert">${disabled.length} endpoint(s) disabled after failing for too long: ${disabled.map(
          (e) => html`<span class="mono">${e.id}</span> (${e.client_id}) `,
        )}</p>`;
  const body =
    found.body.data.length === 0
      ? html`${intro}<p data-testid="webhooks-empty">No client has a webhook endpoint.</p>`
      : html`${intro}${alert}${webhooksTable(found.body.data)}`;
  return render(c, { ...options, body });
}
