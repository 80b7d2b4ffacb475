import { existsSync, readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { join } from "node:path";
import { ROOT } from "./paths.js";

/** The script-tag build of @notify/inbox-elements (`npm run build -w @notify/inbox-elements`). */
export const INBOX_BUNDLE = join(ROOT, "libs", "inbox-elements", "dist", "notify-inbox.js");

export interface InboxDemoOptions {
  port: number;
  host: string;
  /** The API's origin (ingest), which the page's elements call and the demo mints tokens at. */
  apiUrl: string;
  /** The development key: it stays in this process; the page only ever sees inbox tokens. */
  apiKey: string;
  /** Whose inbox the page shows. */
  userId: string;
  /** The body of the notification the page's curl sends (the banner's). */
  notification: Record<string, unknown>;
  bundleFile?: string;
}

export interface InboxDemo {
  url: string;
  port: number;
  close(): Promise<void>;
}

const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string,
  );

/**
 * A fake product page ("Acme") embedding <notify-inbox> and <notify-preferences> for one user, on
 * an origin of its own, as a caller's product would: its backend (this server) mints the user's
 * inbox token with the API key at POST /token, and the page's tokenProvider asks it for one. The
 * page carries a strict Content-Security-Policy (scripts and styles from itself, requests to
 * itself and the API), so the elements are shown to need no inline script or eval.
 */
export async function startInboxDemo(options: InboxDemoOptions): Promise<InboxDemo> {
  const { userId, notification } = options;
  const bundleFile = options.bundleFile ?? INBOX_BUNDLE;
  const api = new URL(options.apiUrl).origin;
  const csp = [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    `connect-src 'self' ${api}`,
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join("; ");

  const send = (res: ServerResponse, status: number, type: string, body: string | Buffer, extra = {}) => {
    res.writeHead(status, {
      "content-type": type,
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      ...extra,
    });
    res.end(body);
  };

  const mint = async (res: ServerResponse) => {
    try {
      const minted = await fetch(`${api}/api/v1/users/${encodeURIComponent(userId)}/inbox-tokens`, {
        method: "POST",
        headers: { authorization: `Bearer ${options.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ ttl_seconds: 3600 }),
        signal: AbortSignal.timeout(5000),
      });
      const body = (await minted.json()) as { token?: string; expires_at?: string; detail?: string };
      if (minted.status !== 201 || !body.token) {
        return send(res, 502, "application/json", JSON.stringify({ error: body.detail ?? `HTTP ${minted.status}` }));
      }
      // The token and its expiry only: never the key, never the token id (which revokes).
      send(res, 200, "application/json", JSON.stringify({ token: body.token, expires_at: body.expires_at }));
    } catch (error) {
      send(res, 502, "application/json", JSON.stringify({ error: (error as Error).message }));
    }
  };

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    // A page on another site that rebinds its own name to 127.0.0.1 reaches this server as
    // "same-origin" with its own name in Host: it is refused, so it can mint no token.
    const hostname = (req.headers.host ?? "").replace(/:\d+$/, "");
    if (hostname !== "127.0.0.1" && hostname !== "localhost") {
      return send(res, 403, "text/plain", "the demo answers on 127.0.0.1 and localhost only");
    }
    const url = new URL(req.url ?? "/", "http://demo");
    if (req.method === "POST" && url.pathname === "/token") {
      // Only this page's own script asks (a form post from another site could not read the answer anyway).
      if (req.headers["sec-fetch-site"] !== undefined && req.headers["sec-fetch-site"] !== "same-origin") {
        return send(res, 403, "application/json", JSON.stringify({ error: "same-origin requests only" }));
      }
      return void mint(res);
    }
    if (req.method !== "GET" && req.method !== "HEAD") return send(res, 405, "text/plain", "method not allowed");
    switch (url.pathname) {
      case "/": {
        const theme = url.searchParams.get("theme") === "midnight" ? "midnight" : "light";
        return send(res, 200, "text/html; charset=utf-8", page({ api, userId, notification, theme }), {
          "content-security-policy": csp,
        });
      }
      case "/demo.css":
        return send(res, 200, "text/css; charset=utf-8", STYLE);
      case "/demo.js":
        return send(res, 200, "text/javascript; charset=utf-8", SCRIPT);
      case "/notify-inbox.js":
        if (!existsSync(bundleFile)) {
          return send(
            res,
            503,
            "text/javascript; charset=utf-8",
            `console.error(${JSON.stringify(`${bundleFile} is missing: build it with \`npm run build -w @notify/inbox-elements\``)});`,
          );
        }
        return send(res, 200, "text/javascript; charset=utf-8", readFileSync(bundleFile));
      case "/favicon.ico":
        return send(res, 200, "image/svg+xml", FAVICON);
      default:
        return send(res, 404, "text/plain", "not found");
    }
  };

  const server = createServer(handle);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : options.port;
  const host = options.host === "0.0.0.0" ? "127.0.0.1" : options.host;
  return {
    url: `http://${host}:${port}/`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

const FAVICON =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="4" fill="#0a58ca"/></svg>';

function page(input: {
  api: string;
  userId: string;
  notification: Record<string, unknown>;
  theme: "light" | "midnight";
}): string {
  const { api, userId, theme } = input;
  const body = JSON.stringify({ ...input.notification, user_id: userId });
  const curl = [
    `curl -sS -X POST ${api}/api/v1/notifications \\`,
    `  -H "Authorization: Bearer $NOTIFY_KEY" \\`,
    `  -H "Idempotency-Key: $(node -e 'console.log(crypto.randomUUID())')" \\`,
    `  -H 'Content-Type: application/json' \\`,
    `  -d '${body}'`,
  ].join("\n");
  const other = theme === "midnight" ? "/" : "/?theme=midnight";
  const otherName = theme === "midnight" ? "light theme" : "midnight theme";
  return `<!doctype html>
<html lang="en" data-theme="${theme}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Acme · notifications demo</title>
<link rel="icon" href="/favicon.ico">
<link rel="stylesheet" href="/demo.css">
<script type="module" src="/demo.js"></script>
</head>
<body data-api="${escapeHtml(api)}">
<header class="topbar">
  <a class="brand" href="/">Acme</a>
  <nav aria-label="Acme">
    <a href="/">Projects</a>
    <a href="/">Reports</a>
    <a href="${other}">Try the ${otherName}</a>
  </nav>
  <div class="account">
    <notify-inbox base-url="${escapeHtml(api)}" data-testid="inbox"></notify-inbox>
    <span class="avatar" aria-label="Signed in as ${escapeHtml(userId)}" role="img">${escapeHtml(userId.slice(0, 1).toUpperCase())}</span>
  </div>
</header>
<main>
  <h1>Good morning, ${escapeHtml(userId)}</h1>
  <section class="hint" aria-labelledby="try-it">
    <h2 id="try-it">Try it</h2>
    <p>This page is a product embedding notify's inbox for <code>${escapeHtml(userId)}</code>. Its own server minted the
    user's inbox token with the development key; the page never sees the key.</p>
    <ol>
      <li>Send ${escapeHtml(userId)} a notification, with the Dev key <code>npm start</code> printed in <code>NOTIFY_KEY</code>:
        <pre tabindex="0" data-testid="curl"><code>${escapeHtml(curl)}</code></pre>
        It appears in the bell at once.</li>
      <li>Untick <em>In-app inbox</em> below, save, and send it again: email, SMS and push still go out, and the bell stays quiet.</li>
    </ol>
    <p class="routed" role="status" data-testid="routed"></p>
  </section>
  <section aria-labelledby="settings">
    <h2 id="settings">Settings</h2>
    <notify-preferences base-url="${escapeHtml(api)}" data-testid="preferences"></notify-preferences>
  </section>
</main>
<footer><p>Acme is a demo. The inbox and preferences are <code>@notify/inbox-elements</code>.</p></footer>
</body>
</html>
`;
}

/**
 * The page's script: loads the elements' bundle and hands them a token provider that asks this
 * page's backend for a token. The elements ask at first and again when the server refuses the
 * token they hold (it expired), so the provider keeps nothing itself.
 */
const SCRIPT = `import "/notify-inbox.js";

async function tokenProvider() {
  const response = await fetch("/token", { method: "POST" });
  if (!response.ok) throw new Error("the demo could not get an inbox token (HTTP " + response.status + ")");
  return (await response.json()).token;
}
for (const element of document.querySelectorAll("notify-inbox, notify-preferences")) {
  element.tokenProvider = tokenProvider;
}
const routed = document.querySelector("[data-testid=routed]");
document.addEventListener("notify-inbox:item-click", (event) => {
  routed.textContent = "Acme would open " + (event.detail.item.title ?? "the notification") + " (" + event.detail.item.notification_id + ").";
});
`;

const STYLE = `:root {
  color-scheme: light;
  --page-bg: #f6f8fa;
  --page-text: #1b1f24;
  --page-muted: #57606a;
  --page-card: #ffffff;
  --page-border: #d0d7de;
  --page-accent: #0a58ca;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
}
[data-theme="midnight"] {
  color-scheme: dark;
  --page-bg: #0b1020;
  --page-text: #e6edf3;
  --page-muted: #a8b3c2;
  --page-card: #131a2e;
  --page-border: #2c3654;
  --page-accent: #8ab4ff;
}
/* The midnight theme of the elements: custom properties, and a part or two. */
[data-theme="midnight"] notify-inbox,
[data-theme="midnight"] notify-preferences {
  --notify-color-text: #e6edf3;
  --notify-color-muted: #a8b3c2;
  --notify-color-background: #131a2e;
  --notify-color-surface: #1b2440;
  --notify-color-border: #2c3654;
  --notify-color-accent: #8ab4ff;
  --notify-color-accent-text: #0b1020;
  --notify-color-unread: #1d2a4d;
  --notify-color-badge: #ff8a80;
  --notify-color-badge-text: #0b1020;
  --notify-color-focus: #8ab4ff;
  --notify-color-success: #7ee2a8;
  --notify-color-danger: #ffb4ab;
  --notify-radius: 14px;
  --notify-font-family: "Trebuchet MS", system-ui, sans-serif;
}
[data-theme="midnight"] notify-inbox::part(bell) {
  border-color: #8ab4ff;
}
[data-theme="midnight"] notify-inbox::part(item-unread) {
  box-shadow: inset 3px 0 0 #8ab4ff;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--page-bg); color: var(--page-text); }
a { color: var(--page-accent); }
:focus-visible { outline: 2px solid var(--page-accent); outline-offset: 2px; }
.topbar {
  display: flex; align-items: center; gap: 24px; padding: 10px 24px;
  background: var(--page-card); border-bottom: 1px solid var(--page-border);
}
.brand { font-weight: 800; font-size: 20px; color: var(--page-text); text-decoration: none; }
nav { display: flex; gap: 16px; flex: 1; }
nav a { color: var(--page-muted); text-decoration: none; }
nav a:hover { color: var(--page-text); }
.account { display: flex; align-items: center; gap: 12px; }
.avatar {
  width: 36px; height: 36px; border-radius: 50%; display: inline-flex; align-items: center; justify-content: center;
  background: var(--page-accent); color: var(--page-card); font-weight: 700;
}
main { max-width: 880px; margin: 0 auto; padding: 24px; display: grid; grid-template-columns: minmax(0, 1fr); gap: 24px; }
h1 { margin: 8px 0 0; font-size: 24px; }
h2 { font-size: 18px; margin: 0 0 8px; }
.hint { background: var(--page-card); border: 1px solid var(--page-border); border-radius: 8px; padding: 16px 20px; }
.hint li { margin: 8px 0; }
pre { background: var(--page-bg); border: 1px solid var(--page-border); border-radius: 6px; padding: 10px; overflow-x: auto; font-size: 12px; }
code { font-size: 0.95em; }
.routed { color: var(--page-muted); margin: 0; min-height: 1.4em; }
footer { max-width: 880px; margin: 0 auto; padding: 0 24px 24px; color: var(--page-muted); font-size: 13px; }
@media (prefers-reduced-motion: reduce) { * { transition: none !important; animation: none !important; } }
`;
