import { html } from "hono/html";
import { queryString } from "../api.js";
import { type ConsoleContext, render, statusOf } from "../context.js";
import { type Html, problemBox, show, statusText, when } from "../layout.js";
import type { ChannelView, NotificationDetail, TimelineEntry } from "../views.js";

const TRACE_ID = /^[0-9a-f]{32}$/;

/** The trace id, linked to the trace viewer when CONSOLE_TRACE_URL is set. */
function traceCell(traceId: unknown, traceUrl: string | undefined): Html | string {
  if (typeof traceId !== "string" || traceId === "") return "—";
  if (traceUrl === undefined || !TRACE_ID.test(traceId)) return html`<code data-testid="trace-id">${traceId}</code>`;
  const href = traceUrl.replaceAll("{trace_id}", traceId);
  return html`<a href="${href}" rel="noreferrer" data-testid="trace-id"><code>${traceId}</code></a>`;
}

function channelRows(channels: Record<string, ChannelView>): Html {
  return html`${Object.entries(channels).map(
    ([channel, view]) => html`<tr data-testid="channel-${channel}">
<td>${channel}</td><td data-testid="channel-status-${channel}">${statusText(view.status)}</td><td>${show(view.provider)}</td>
<td class="mono">${show(view.provider_id)}</td><td>${show(view.reason)}</td><td>${when(view.next_attempt_at)}</td><td>${when(view.ts)}</td></tr>`,
  )}`;
}

const text = (value: unknown): string | undefined =>
  value === null || value === undefined || value === "" ? undefined : String(value);

/** One history entry as a row: what happened, on which channel, through which provider, with what result and why. */
function timelineRow(entry: TimelineEntry): Html {
  const event = text(entry.event) ?? "?";
  const label = event === "attempt" && entry.attempt !== undefined ? `attempt ${show(entry.attempt)}` : event;
  let provider: string | undefined;
  let result: Html | string | undefined;
  let why: string | undefined;
  switch (event) {
    case "provider_switch":
      provider = `${show(entry.from)} → ${show(entry.to)}`;
      break;
    case "fallback":
      result = `routed after ${show(entry.from)}`;
      why = text(entry.because);
      break;
    case "attempt":
      provider = text(entry.provider);
      result = text(entry.outcome);
      why = text(entry.error);
      break;
    case "routed":
    case "status":
      result = statusText(entry.status);
      why = text(entry.reason);
      break;
    case "receipt":
      provider = text(entry.provider);
      result = text(entry.receipt);
      why = text(entry.reason);
      break;
    default:
      provider = text(entry.provider);
      result = text(entry.outcome ?? entry.status ?? entry.receipt);
      why = text(entry.reason ?? entry.error);
  }
  const providerId = text(entry.provider_id);
  return html`<tr data-testid="timeline-entry">
<td>${when(entry.at)}</td><td>${label}</td><td>${show(entry.channel)}</td>
<td>${provider ?? "—"}${providerId === undefined ? "" : html` <span class="muted mono">${providerId}</span>`}</td>
<td>${result ?? "—"}</td><td>${why ?? "—"}</td></tr>`;
}

/**
 * The digest a notification joined or sends: its key, status and size, and a link to the
 * digest's own notification (its channels and timeline) once sent.
 */
function digestCell(digest: NotificationDetail["digest"]): Html | string {
  if (!digest) return "—";
  const own = digest.notification_id
    ? digest.role === "digest"
      ? " (this is the digest's notification)"
      : html` · sent as <a class="mono" href="/console/notifications/${encodeURIComponent(digest.notification_id)}">${digest.notification_id}</a>`
    : html` · closes ${when(digest.closes_at)}`;
  return html`<code>${digest.key}</code> · ${digest.status} · ${digest.item_count} item${digest.item_count === 1 ? "" : "s"}${own}`;
}

/** GET /console/notifications/:id: its facts, its channels, and its history oldest first. */
export async function notificationPage(c: ConsoleContext, traceUrl: string | undefined): Promise<Response> {
  const id = c.req.param("id") ?? "";
  const found = await c.get("operator").api.get<NotificationDetail>(`/ops/notifications/${encodeURIComponent(id)}`);
  if (!found.ok) {
    return render(c, { title: `Notification ${id}`, body: problemBox(found.problem) }, statusOf(found.problem.status));
  }
  const n = found.body;
  const userLink =
    n.user_id === undefined
      ? "—"
      : html`<a href="/console/notifications${queryString({ user_id: n.user_id, client_id: n.client_id })}">${n.user_id}</a>`;
  const timeline = n.timeline ?? [];
  const body = html`<dl class="facts" data-testid="notification">
<dt>Id</dt><dd class="mono" data-testid="notification-id">${n.notification_id}</dd>
<dt>Status</dt><dd data-testid="notification-status">${statusText(n.status)}</dd>
<dt>Client</dt><dd data-testid="notification-client">${show(n.client_id)}</dd>
<dt>User</dt><dd data-testid="notification-user">${userLink}</dd>
<dt>Category</dt><dd data-testid="notification-category">${show(n.category)}</dd>
<dt>Template</dt><dd data-testid="notification-template">${show(n.template_id)}</dd>
<dt>Priority</dt><dd>${show(n.priority)}</dd>
<dt>Created</dt><dd>${when(n.created_at)}</dd>
<dt>Deliver by</dt><dd>${when(n.deliver_by)}</dd>
<dt>Send at</dt><dd data-testid="notification-send-at">${when(n.send_at)}${
    n.send_at_local
      ? html` <span class="muted">(${n.send_at_local.time}${n.send_at_local.date ? ` on ${n.send_at_local.date}` : ""} the user's time)</span>`
      : ""
  }</dd>
<dt>Digest</dt><dd data-testid="notification-digest">${digestCell(n.digest)}</dd>
<dt>Trace</dt><dd>${traceCell(n.trace_id, traceUrl)}</dd>
</dl>
<p><a href="/console/dead-letters${queryString({ notification_id: n.notification_id })}">Its dead letters</a></p>
<h2>Channels</h2>
<table data-testid="channels">
<thead><tr><th>Channel</th><th>Status</th><th>Provider</th><th>Provider id</th><th>Reason</th><th>Next attempt</th><th>Updated</th></tr></thead>
<tbody>${channelRows(n.channels ?? {})}</tbody></table>
<h2>Timeline</h2>
${
  timeline.length === 0
    ? html`<p class="muted" data-testid="timeline-empty">No history yet.</p>`
    : html`<table data-testid="timeline">
<thead><tr><th>Time</th><th>Event</th><th>Channel</th><th>Provider</th><th>Outcome / status / receipt</th><th>Reason / error</th></tr></thead>
<tbody>${timeline.map(timelineRow)}</tbody></table>`
}`;
  return render(c, { title: `Notification ${n.notification_id}`, body });
}
