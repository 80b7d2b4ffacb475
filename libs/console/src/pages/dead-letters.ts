import { CHANNELS, DEAD_LETTER_CLASSES } from "@notify/core";
import { html } from "hono/html";
import { queryString } from "../api.js";
import { type ConsoleContext, csrfOf, field, fields, formOf, render, statusOf } from "../context.js";
import { type Html, problemBox, show, when } from "../layout.js";
import type { DeadLetterSummary, Page, ReplayAnswer, ReplayOutcome } from "../views.js";

const FILTERS = ["channel", "class", "notification_id"] as const;
/** The API's page size cap: one replay takes at most this many letters from the console. */
const MAX_SELECTED = 200;

const option = (value: string, selected: string | undefined) =>
  html`<option value="${value}"${value === selected ? html` selected` : ""}>${value}</option>`;

function filterForm(filters: Record<string, string | undefined>): Html {
  return html`<form class="filters" method="get" action="/console/dead-letters" data-testid="dead-letter-filters">
<label>Channel <select name="channel" data-testid="filter-channel"><option value="">any</option>${CHANNELS.map((ch) => option(ch, filters.channel))}</select></label>
<label>Class <select name="class" data-testid="filter-class"><option value="">any</option>${DEAD_LETTER_CLASSES.map((k) => option(k, filters.class))}</select></label>
<label>Notification id <input name="notification_id" value="${filters.notification_id ?? ""}" size="38" data-testid="filter-notification-id"></label>
<button type="submit" data-testid="filter-submit">Filter</button>
</form>`;
}

const hiddenCsrf = (c: ConsoleContext) => html`<input type="hidden" name="csrf" value="${csrfOf(c)}">`;

/** GET /console/dead-letters?channel=&class=&notification_id=&page= */
export async function deadLettersPage(c: ConsoleContext): Promise<Response> {
  const filters: Record<string, string | undefined> = {};
  for (const name of FILTERS) filters[name] = c.req.query(name)?.trim() || undefined;
  const page = c.req.query("page") ?? "1";
  const found = await c.get("operator").api.get<Page<DeadLetterSummary>>("/dead-letters", { ...filters, page });
  const options = { title: "Dead letters", current: "/console/dead-letters" as const };
  if (!found.ok) {
    return render(
      c,
      { ...options, body: html`${filterForm(filters)}${problemBox(found.problem)}` },
      statusOf(found.problem.status),
    );
  }
  const { data, total_count: total = data.length, page: at = 1, page_size: size = data.length } = found.body;
  const link = (n: number) => `/console/dead-letters${queryString({ ...filters, page: String(n) })}`;
  const pager = html`<p class="muted" data-testid="dead-letter-count">${total} dead letter${total === 1 ? "" : "s"}${
    total > size ? html`, page ${at}` : ""
  }. ${at > 1 ? html`<a href="${link(at - 1)}">Newer</a> ` : ""}${at * size < total ? html`<a href="${link(at + 1)}">Older</a>` : ""}</p>`;
  const table =
    data.length === 0
      ? html`<p data-testid="no-dead-letters">No dead letters match.</p>`
      : html`<form method="post" action="/console/dead-letters/replay" data-testid="replay-form">${hiddenCsrf(c)}
<table data-testid="dead-letters">
<thead><tr><th></th><th>Seq</th><th>Dead-lettered</th><th>Notification</th><th>Client</th><th>User</th><th>Channel</th><th>Provider</th><th>Class</th><th>Reason</th><th class="num">Attempts</th></tr></thead>
<tbody>${data.map(
          (l) => html`<tr data-testid="dead-letter-${l.seq}">
<td><input type="checkbox" name="seq" value="${l.seq}" aria-label="select ${l.seq}" data-testid="select-${l.seq}"></td>
<td><a href="/console/dead-letters/${l.seq}">${l.seq}</a></td><td>${when(l.dead_lettered_at)}</td>
<td>${l.notification_id === undefined ? "—" : html`<a class="mono" href="/console/notifications/${encodeURIComponent(l.notification_id)}">${l.notification_id}</a>`}</td>
<td>${show(l.client_id)}</td><td>${show(l.user_id)}</td><td>${show(l.channel)}</td><td>${show(l.provider)}</td><td>${show(l.class)}</td><td>${show(l.reason)}</td><td class="num">${show(l.attempts)}</td></tr>`,
        )}</tbody></table>
<p><label class="check"><input type="checkbox" name="include_unsettled" value="true" data-testid="include-unsettled"> Include unsettled (the provider may have accepted them: replaying may send twice)</label></p>
<p><button type="submit" name="action" value="dry_run" class="secondary" data-testid="dry-run">Dry run</button>
<button type="submit" name="action" value="replay" data-testid="replay-selected">Replay selected</button></p>
</form>`;
  return render(c, { ...options, body: html`${filterForm(filters)}${pager}${table}` });
}

/** GET /console/dead-letters/:seq: the letter in full, as the API answers it. */
export async function deadLetterPage(c: ConsoleContext): Promise<Response> {
  const seq = c.req.param("seq") ?? "";
  const found = await c.get("operator").api.get<Record<string, unknown>>(`/dead-letters/${encodeURIComponent(seq)}`);
  const options = { title: `Dead letter ${seq}`, current: "/console/dead-letters" as const };
  if (!found.ok) return render(c, { ...options, body: problemBox(found.problem) }, statusOf(found.problem.status));
  return render(c, {
    ...options,
    body: html`<pre class="mono" data-testid="dead-letter">${JSON.stringify(found.body, null, 2)}</pre>`,
  });
}

function diffTable(rows: readonly ReplayOutcome[], testid: "replay-diff" | "replay-results"): Html {
  return html`<table data-testid="${testid}">
<thead><tr><th>Seq</th><th>Notification</th><th>Channel</th><th>Result</th><th>Address in the letter</th><th></th><th>Address now</th></tr></thead>
<tbody>${rows.map(
    (r) => html`<tr data-testid="${testid === "replay-diff" ? `replay-diff-${r.seq}` : "replay-result"}">
<td>${r.seq}</td><td>${r.notification_id === undefined ? "—" : html`<a class="mono" href="/console/notifications/${encodeURIComponent(r.notification_id)}">${r.notification_id}</a>`}</td>
<td>${show(r.channel)}</td><td>${show(r.result)}</td><td class="mono">${show(r.previous_to)}</td><td>→</td><td class="mono">${show(r.to)}</td></tr>`,
  )}</tbody></table>`;
}

/**
 * POST /console/dead-letters/replay (seq, action=dry_run|replay, include_unsettled): a dry run
 * shows what a replay would do, with each letter's address then and now, and a form to replay
 * exactly those; a replay shows each letter's result.
 */
export async function replayAction(c: ConsoleContext): Promise<Response> {
  const form = await formOf(c);
  const options = { title: "Replay dead letters", current: "/console/dead-letters" as const };
  const raw = fields(form, "seq");
  const seqs = [...new Set(raw.filter((s) => /^\d{1,15}$/.test(s)).map(Number))].filter((n) => n > 0);
  if (seqs.length === 0 || seqs.length !== raw.length || seqs.length > MAX_SELECTED) {
    const why =
      seqs.length > MAX_SELECTED
        ? `Select at most ${MAX_SELECTED} dead letters at once.`
        : "Select at least one dead letter (by its checkbox).";
    return render(
      c,
      {
        ...options,
        body: html`<p class="error" data-testid="error">${why}</p><p><a href="/console/dead-letters">Back</a></p>`,
      },
      400,
    );
  }
  const dryRun = field(form, "action") !== "replay";
  const includeUnsettled = field(form, "include_unsettled") === "true";
  const answer = await c.get("operator").api.post<ReplayAnswer>("/dead-letters/replay", {
    seqs,
    dry_run: dryRun,
    ...(includeUnsettled ? { include_unsettled: true } : {}),
  });
  if (!answer.ok) {
    return render(
      c,
      { ...options, body: html`${problemBox(answer.problem)}<p><a href="/console/dead-letters">Back</a></p>` },
      statusOf(answer.problem.status),
    );
  }
  const { data = [], selected } = answer.body;
  if (dryRun) {
    const body = html`<p data-testid="replay-summary">Dry run: ${show(selected)} selected; nothing was sent. Where the user's address changed since, the replay goes to the address now.</p>
${diffTable(data, "replay-diff")}
<form method="post" action="/console/dead-letters/replay" data-testid="replay-these-form">${hiddenCsrf(c)}
${seqs.map((s) => html`<input type="hidden" name="seq" value="${s}">`)}
${includeUnsettled ? html`<input type="hidden" name="include_unsettled" value="true">` : ""}
<button type="submit" name="action" value="replay" data-testid="replay-these">Replay these</button> <a href="/console/dead-letters">Cancel</a>
</form>`;
    return render(c, { ...options, title: "Replay dead letters: dry run", body });
  }
  // Post/redirect/get: the results are shown by the page redirected to, so that reloading it
  // never posts the replay again. A script signed in with a Bearer key has no session to carry
  // them and gets them at once.
  const session = c.get("operator").session;
  if (session === undefined) return render(c, { ...options, body: replayResults(answer.body) });
  session.replayed = answer.body;
  return c.redirect("/console/dead-letters/replayed", 303);
}

function replayResults({ data = [], selected, replayed, skipped }: ReplayAnswer): Html {
  return html`<p data-testid="replay-summary">${show(replayed)} replayed, ${show(skipped)} skipped of ${show(selected)} selected.</p>
${diffTable(data, "replay-results")}
<p><a href="/console/dead-letters">Back to the dead letters</a></p>`;
}

/** GET /console/dead-letters/replayed: the session's last replay results, once. */
export function replayedPage(c: ConsoleContext): Promise<Response> {
  const session = c.get("operator").session;
  const answer = session?.replayed;
  if (session !== undefined) session.replayed = undefined;
  const body =
    answer === undefined
      ? html`<p data-testid="no-replay">No replay results to show (they are shown once).</p><p><a href="/console/dead-letters">Back to the dead letters</a></p>`
      : replayResults(answer);
  return render(c, { title: "Replay dead letters", current: "/console/dead-letters", body });
}
