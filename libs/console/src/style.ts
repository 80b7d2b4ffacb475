/** The console's one stylesheet, served at /console/console.css (CSP: styles from 'self' only). */
export const CONSOLE_CSS = `:root {
  --fg: #1d232b; --muted: #5d6673; --line: #d8dde3; --bg: #ffffff; --panel: #f5f7f9;
  --accent: #1f5fbf; --ok: #1d7a3a; --warn: #9a6200; --bad: #b3261e;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--fg); background: var(--bg);
}
body { margin: 0; }
header { display: flex; align-items: center; gap: 1.5rem; padding: .6rem 1.2rem; background: #17202b; color: #fff; }
header .brand { font-weight: 600; }
header nav { display: flex; gap: 1rem; flex-wrap: wrap; }
header a { color: #cfe0ff; text-decoration: none; }
header a[aria-current="page"] { color: #fff; text-decoration: underline; }
header form { margin-left: auto; }
header button { background: transparent; color: #cfe0ff; border: 1px solid #44546a; }
main { padding: 1rem 1.2rem 3rem; max-width: 1400px; overflow-x: auto; }
h1 { font-size: 1.3rem; margin: .4rem 0 1rem; }
h2 { font-size: 1.05rem; margin: 1.6rem 0 .5rem; }
a { color: var(--accent); }
table { border-collapse: collapse; width: 100%; margin: .4rem 0 1rem; }
th, td { text-align: left; padding: .3rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--panel); font-weight: 600; white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .mono, time { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .92em; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; margin: 0 0 1rem; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
form.inline { display: inline; }
form.filters, form.search { display: flex; flex-wrap: wrap; gap: .6rem; align-items: end; margin: .4rem 0 1rem; }
label { display: flex; flex-direction: column; gap: .15rem; color: var(--muted); font-size: .9em; }
label.check { flex-direction: row; align-items: center; gap: .35rem; }
input, select, button { font: inherit; padding: .3rem .5rem; border: 1px solid var(--line); border-radius: 4px; }
button { background: var(--accent); color: #fff; border-color: var(--accent); cursor: pointer; }
button.secondary { background: var(--bg); color: var(--accent); }
button.danger { background: var(--bad); border-color: var(--bad); }
.notice, .error { padding: .5rem .8rem; border-radius: 4px; margin: .4rem 0 1rem; }
.notice { background: #e8f3ec; border: 1px solid #b9dcc4; }
.error { background: #fbeceb; border: 1px solid #f0c2bf; color: var(--bad); }
.muted { color: var(--muted); }
.state-closed, .status-delivered, .status-completed, .status-expanded { color: var(--ok); }
.state-half_open, .status-retrying, .status-deferred, .status-parked, .status-paused, .status-expanding { color: var(--warn); }
.state-open, .status-failed, .status-bounced, .status-expired, .status-cancelled, .status-disabled { color: var(--bad); }
.status-enabled { color: var(--ok); }
.status-canceled { color: var(--muted); }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(280px, 1fr)); gap: 1rem; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: .6rem .9rem; min-width: 0; overflow-x: auto; }
.card td, .card th { overflow-wrap: anywhere; }
.card.wide { grid-column: span 2; }
.card h2 { margin-top: .2rem; }
.login { max-width: 420px; margin: 4rem auto; }
.login form { display: flex; flex-direction: column; gap: .8rem; }
progress { width: 8rem; vertical-align: middle; }
`;

/** The tab icon, at /console/favicon.svg: without one a browser asks the port's /favicon.ico, a 404. */
export const CONSOLE_ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#17202b"/><path d="M4 12V4l8 8V4" stroke="#cfe0ff" stroke-width="2" fill="none"/></svg>`;
