import { html } from "hono/html";
import type { HtmlEscapedString } from "hono/utils/html";
import type { ApiProblem } from "./api.js";

/** What hono/html produces: every interpolation escaped unless it is itself such a value. */
export type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

const NAV = [
  ["/console", "Overview"],
  ["/console/streams", "Streams"],
  ["/console/providers", "Providers"],
  ["/console/dead-letters", "Dead letters"],
  ["/console/broadcasts", "Broadcasts"],
  ["/console/webhooks", "Webhooks"],
  ["/console/suppressions", "Suppressions"],
] as const;

export interface PageOptions {
  title: string;
  /** The nav entry to mark as the current page. */
  current?: (typeof NAV)[number][0];
  /** The session's CSRF token (the sign-out form); undefined without a session (a Bearer key). */
  csrf?: string;
  /** A message left by the previous action. */
  notice?: string;
  /** Seconds between reloads (a meta refresh: the console runs no script). */
  refresh?: number;
  body: Html;
}

/** The shared shell: header with the navigation and sign-out, the page's body. */
export function page(options: PageOptions): Html {
  const nav = NAV.map(
    ([href, label]) =>
      html`<a href="${href}"${options.current === href ? html` aria-current="page"` : ""}>${label}</a>`,
  );
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
${options.refresh === undefined ? "" : html`<meta http-equiv="refresh" content="${options.refresh}">`}
<title>${options.title} · notify console</title>
<link rel="stylesheet" href="/console/console.css">
<link rel="icon" href="/console/favicon.svg" type="image/svg+xml">
</head>
<body>
<header>
<span class="brand">notify console</span>
<nav>${nav}</nav>
${
  options.csrf === undefined
    ? ""
    : html`<form method="post" action="/console/logout"><input type="hidden" name="csrf" value="${options.csrf}"><button type="submit" data-testid="logout">Sign out</button></form>`
}
</header>
<main>
<h1>${options.title}</h1>
${options.notice === undefined ? "" : html`<p class="notice" data-testid="notice">${options.notice}</p>`}
${options.body}
</main>
</body>
</html>`;
}

/** The page a bare shell wraps for sign-in: no navigation. */
export function loginPage(body: Html): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · notify console</title>
<link rel="stylesheet" href="/console/console.css">
<link rel="icon" href="/console/favicon.svg" type="image/svg+xml">
</head>
<body><main class="login">${body}</main></body>
</html>`;
}

/** An API problem as a sentence an operator can act on: never a stack, never internals. */
export function problemText(problem: ApiProblem): string {
  const retry = problem.retryAfter === undefined ? "" : `; retry in ${problem.retryAfter} s`;
  const detail = problem.detail === undefined ? "" : `: ${problem.detail}`;
  if (problem.status === 503) return `Dependency unavailable, retry${detail}${retry}`;
  if (problem.status === 429) return `Rate limited${detail}${retry}`;
  if (problem.status >= 500) return `The API failed (${problem.status} ${problem.title}); see the ingest log`;
  return `${problem.title}${detail}`;
}

export const problemBox = (problem: ApiProblem): Html =>
  html`<p class="error" data-testid="error" role="alert">${problemText(problem)}</p>`;

/** An RFC 3339 instant as UTC date and time, machine-readable in `datetime`; a dash when none. */
export function when(value: unknown): Html | string {
  if (typeof value !== "string" || value === "") return "—";
  const shown = value.replace("T", " ");
  return html`<time datetime="${value}">${shown}</time>`;
}

/** A value as text, a dash when absent. */
export function show(value: unknown): string {
  if (value === null || value === undefined || value === "") return "—";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** A status word, coloured by a class derived from it (only [a-z_] reach the class name). */
export function statusText(value: unknown, prefix = "status"): Html {
  const word = show(value);
  return html`<span class="${prefix}-${word.replace(/[^a-z_]/g, "")}">${word}</span>`;
}

/** `?refresh=N` as seconds between 2 and 3600; undefined when absent or not a number. */
export function refreshSeconds(value: string | undefined): number | undefined {
  if (value === undefined || !/^\d{1,5}$/.test(value)) return undefined;
  return Math.min(3600, Math.max(2, Number(value)));
}
