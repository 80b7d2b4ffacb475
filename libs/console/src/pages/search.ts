import { html } from "hono/html";
import { type ConsoleContext, type PageStatus, render, statusOf } from "../context.js";
import { type Html, problemBox, show, statusText, when } from "../layout.js";
import type { NotificationSummary } from "../views.js";

const FIELDS = ["notification_id", "user_id", "client_id", "idempotency_key"] as const;
type SearchQuery = Partial<Record<(typeof FIELDS)[number], string>>;

/** The search form (GET, so a result is a link an operator can share). */
export function searchForm(query: SearchQuery = {}): Html {
  return html`<form class="search" method="get" action="/console/notifications" data-testid="search-form">
<label>Notification id <input name="notification_id" value="${query.notification_id ?? ""}" size="38" data-testid="search-notification-id"></label>
<label>User id <input name="user_id" value="${query.user_id ?? ""}" data-testid="search-user-id"></label>
<label>Client id <input name="client_id" value="${query.client_id ?? ""}" data-testid="search-client-id"></label>
<label>Idempotency key <input name="idempotency_key" value="${query.idempotency_key ?? ""}" data-testid="search-idempotency-key"></label>
<button type="submit" data-testid="search-submit">Search</button>
</form>`;
}

/** A list of notifications, each linking to its page. */
export function notificationTable(rows: readonly NotificationSummary[]): Html {
  return html`<table data-testid="notifications">
<thead><tr><th>Notification</th><th>Status</th><th>Client</th><th>User</th><th>Category</th><th>Template</th><th>Priority</th><th>Channels</th><th>Created</th></tr></thead>
<tbody>${rows.map(
    (n) => html`<tr data-testid="notification-${n.notification_id}">
<td><a class="mono" href="/console/notifications/${encodeURIComponent(n.notification_id)}">${n.notification_id}</a></td>
<td>${statusText(n.status)}</td><td>${show(n.client_id)}</td><td>${show(n.user_id)}</td><td>${show(n.category)}</td>
<td>${show(n.template_id)}</td><td>${show(n.priority)}</td>
<td>${Object.entries(n.channels ?? {}).map(([channel, view]) => html`${channel}: ${statusText(view.status)} `)}</td>
<td>${when(n.created_at)}</td></tr>`,
  )}</tbody></table>`;
}

/** GET /console/notifications?notification_id=&user_id=&client_id=&idempotency_key= */
export async function searchPage(c: ConsoleContext): Promise<Response> {
  const query: SearchQuery = {};
  for (const name of FIELDS) {
    const value = c.req.query(name)?.trim();
    if (value) query[name] = value;
  }
  const body = [searchForm(query)];
  let status: PageStatus = 200;
  if (query.notification_id === undefined && query.user_id === undefined && query.idempotency_key === undefined) {
    body.push(html`<p class="muted">Search by notification id, by user id, or by client id and idempotency key.</p>`);
  } else {
    const found = await c
      .get("operator")
      .api.get<{ data: NotificationSummary[] }>("/ops/notifications", { ...query, limit: "200" });
    if (!found.ok) {
      status = statusOf(found.problem.status);
      body.push(problemBox(found.problem));
    } else if (found.body.data.length === 0) {
      body.push(html`<p data-testid="no-results">No notification matches.</p>`);
    } else {
      body.push(html`<p class="muted">${found.body.data.length} found, newest first.</p>`);
      body.push(notificationTable(found.body.data));
    }
  }
  return render(c, { title: "Notifications", body: html`${body}` }, status);
}
