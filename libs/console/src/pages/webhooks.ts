import { html } from "hono/html";
import { type ConsoleContext, csrfOf, fields, formOf, render, statusOf } from "../context.js";
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
<td class="mono"><a href="/console/webhooks/${encodeURIComponent(e.id)}">${e.id}</a></td><td>${show(e.client_id)}</td><td class="mono">${show(e.url)}</td>
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

/** One dead letter of an endpoint (GET /api/v1/ops/webhook-endpoints/{id}/dead-letters). */
interface DeadLetterView {
  event_id: string;
  event_type?: string;
  attempts?: number;
  last_error?: string | null;
  occurred_at?: string;
  died_at?: string;
}

/** GET /console/webhooks/:id : an endpoint's dead letters, and a form that posts them again. */
export async function webhookPage(c: ConsoleContext): Promise<Response> {
  const id = c.req.param("id") ?? "";
  const found = await c
    .get("operator")
    .api.get<{ data: DeadLetterView[] }>(`/ops/webhook-endpoints/${encodeURIComponent(id)}/dead-letters`, {
      limit: "500",
    });
  const options = { title: `Webhook endpoint ${id}`, current: "/console/webhooks" as const };
  const back = html`<p><a href="/console/webhooks">All endpoints</a></p>`;
  if (!found.ok) {
    return render(c, { ...options, body: html`${back}${problemBox(found.problem)}` }, statusOf(found.problem.status));
  }
  const letters = found.body.data;
  const replay =
    letters.length === 0
      ? ""
      : html`<form method="post" action="/console/webhooks/${encodeURIComponent(id)}/replay">
<input type="hidden" name="csrf" value="${csrfOf(c)}">${letters.map(
          (l) => html`<input type="hidden" name="event_id" value="${l.event_id}">`,
        )}<button type="submit" data-testid="replay-webhooks">Post these ${letters.length} events again</button></form>`;
  const table =
    letters.length === 0
      ? html`<p data-testid="no-webhook-dead-letters">No dead letters.</p>`
      : html`<table data-testid="webhook-dead-letters">
<thead><tr><th>Event</th><th>Type</th><th class="num">Attempts</th><th>Happened</th><th>Died</th><th>Last error</th></tr></thead>
<tbody>${letters.map(
          (
            l,
          ) => html`<tr data-testid="webhook-dead-${l.event_id}"><td class="mono">${l.event_id}</td><td>${show(l.event_type)}</td>
<td class="num">${show(l.attempts)}</td><td>${when(l.occurred_at)}</td><td>${when(l.died_at)}</td><td>${show(l.last_error)}</td></tr>`,
        )}</tbody></table>`;
  return render(c, { ...options, body: html`${back}${table}${replay}` });
}

/** POST /console/webhooks/:id/replay : the dead letters listed are owed again, then back to the page. */
export async function webhookReplayAction(c: ConsoleContext): Promise<Response> {
  const id = c.req.param("id") ?? "";
  const eventIds = fields(await formOf(c), "event_id");
  const page = `/console/webhooks/${encodeURIComponent(id)}`;
  const done = await c
    .get("operator")
    .api.post<{ replayed: number }>(`/ops/webhook-endpoints/${encodeURIComponent(id)}/replay`, { event_ids: eventIds });
  if (!done.ok) {
    return render(
      c,
      {
        title: `Webhook endpoint ${id}`,
        current: "/console/webhooks",
        body: html`${problemBox(done.problem)}<p><a href="${page}">Back</a></p>`,
      },
      statusOf(done.problem.status),
    );
  }
  const session = c.get("operator").session;
  if (session !== undefined) session.notice = `${done.body.replayed} event(s) owed again to ${id}.`;
  return c.redirect(page, 303);
}
