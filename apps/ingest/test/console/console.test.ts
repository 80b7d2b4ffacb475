import { randomUUID } from "node:crypto";
import type { ConsoleOptions } from "@notify/console";
import { mountConsole, SECURITY_HEADERS } from "@notify/console";
import type { DeadLetter } from "@notify/core";
import { joinDigest, moveStatus, seedApiKey, seedTemplate } from "@notify/db";
import { createAdminApp, createAttemptThrottle, toAppError } from "@notify/http";
import { startDeadLetterResponder } from "@notify/ops";
import { captureLogger, freshBus, freshDatabase, settled } from "@notify/testing";
import t from "tap";
import { apiAt, consoleApp, startIngest } from "./support.js";

// The operator console driven over HTTP as a browser would (cookies, forms, redirects by hand),
// against the real API (ingest, its own process) on a real database and NATS. The console is
// mounted here, as ingest mounts it on its operator's port, so each test may give it options of
// its own (a TLS proxy, a stricter pre-auth budget) over the same API.
const TRACE_URL = "http://localhost:16686/trace/{trace_id}";
const { url: databaseUrl, database } = await freshDatabase(t);
const bus = await freshBus(t);
// Key lookups are not cached, so a key revoked by a test is refused at the next request.
const ingest = await startIngest(
  t,
  { databaseUrl, namespace: bus.naming.namespace, partitions: bus.naming.partitions },
  { AUTH_CACHE_TTL_SECONDS: "0", CONSOLE_ENABLED: "false" },
);
const api = apiAt(ingest.url);
// The processor's answers to ingest's dead-letter routes: without them every dead-letter page is 503.
const responder = startDeadLetterResponder({
  database,
  bus,
  log: captureLogger("responder").log,
  criticalCategories: [],
  explain: toAppError,
});
t.teardown(() => responder.stop());
await responder.ready;
await seedTemplate(database, {
  id: "welcome",
  params: ["name"],
  variants: [{ channel: "email", locale: "en", subject: "Hi", body: "<%= it.name %>" }],
});
const admin = await seedApiKey(database, { clientId: "ops", name: "operator", scopes: ["operator"] });
const shop = await seedApiKey(database, { clientId: "shop", name: "shop", scopes: ["ingest", "read"] });
// A client's admin: every scope of its own client, none of the deployment's.
const shopAdmin = await seedApiKey(database, { clientId: "shop", name: "shop's admin", scopes: ["admin"] });

/**
 * A console of its own over the API. Ingest's key lookup vouches for the active keys it holds
 * (apps/ingest/test/preauth.test.ts); here the operator's own key stands for such a key.
 */
const consoleOver = (options: Partial<ConsoleOptions> = {}) =>
  consoleApp(t, {
    api,
    preauthThrottle: createAttemptThrottle({ perSecond: 2, burst: 60 }),
    vouches: (key) => key === admin,
    ...options,
  });
const { url, lines } = await consoleOver({ traceUrl: TRACE_URL });

const EVIL = `<script>alert(1)</script>`;
const EVIL_USER = `<i>"u1'</i>`;

/** Posts a notification as the shop and waits until it is committed and published. */
async function notify(userId: string): Promise<string> {
  const response = await api.request("/api/v1/notifications", {
    method: "POST",
    headers: { "x-api-key": shop, "content-type": "application/json", "idempotency-key": randomUUID() },
    body: JSON.stringify({
      user_id: userId,
      category: "account",
      template_id: "welcome",
      data: { name: EVIL },
      priority: "transactional",
    }),
  });
  t.equal(response.status, 202, "the notification is accepted");
  const { notification_id: id } = (await response.json()) as { notification_id: string };
  await settled(database, id);
  return id;
}

const cookieOf = (response: Response) => /notify_console=([^;]*)/.exec(response.headers.get("set-cookie") ?? "")?.[1];

const get = (path: string, cookie?: string, headers: Record<string, string> = {}) =>
  fetch(`${url}${path}`, {
    redirect: "manual",
    headers: { ...(cookie ? { cookie: `notify_console=${cookie}` } : {}), ...headers },
  });

const post = (
  path: string,
  form: Record<string, string | string[]>,
  cookie?: string,
  headers: Record<string, string> = {},
) => {
  const body = new URLSearchParams();
  for (const [name, value] of Object.entries(form)) for (const v of [value].flat()) body.append(name, v);
  return fetch(`${url}${path}`, {
    method: "POST",
    redirect: "manual",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      ...(cookie ? { cookie: `notify_console=${cookie}` } : {}),
      ...headers,
    },
    body,
  });
};

/** Signs in with a key; answers the session cookie. */
async function signIn(key = admin): Promise<string> {
  const response = await post("/console/login", { key }, undefined, { origin: url });
  if (response.status !== 303) throw new Error(`sign-in answered ${response.status}: ${await response.text()}`);
  const cookie = cookieOf(response);
  if (!cookie) throw new Error("no session cookie");
  return cookie;
}

/** The CSRF token of a page's forms. */
async function csrfOf(cookie: string, path = "/console/broadcasts"): Promise<string> {
  const page = await (await get(path, cookie)).text();
  const token = /name="csrf" value="([^"]+)"/.exec(page)?.[1];
  if (!token) throw new Error(`no CSRF token on ${path}`);
  return token;
}

t.test("sign-in with an operator key: a session cookie, HttpOnly and SameSite=Strict, never the key", async (t) => {
  const form = await get("/console/login");
  t.equal(form.status, 200);
  t.match(await form.text(), 'name="key"');
  const response = await post("/console/login", { key: admin }, undefined, { origin: url });
  t.equal(response.status, 303);
  t.equal(response.headers.get("location"), "/console");
  const setCookie = response.headers.get("set-cookie") ?? "";
  t.match(setCookie, /^notify_console=[A-Za-z0-9_-]{43};/, "a random 32-byte id");
  t.match(setCookie, /HttpOnly/i);
  t.match(setCookie, /SameSite=Strict/i);
  t.match(setCookie, /Path=\/console/);
  t.notMatch(setCookie, /Secure/i, "on loopback over http, where a Secure cookie would not be kept");
  t.notMatch(setCookie, /Domain=/i);
  t.notMatch(setCookie, admin, "the key is not the cookie");
  const again = await post("/console/login", { key: admin }, cookieOf(response), { origin: url });
  t.not(cookieOf(again), cookieOf(response), "signing in again mints a new id");
  t.equal((await get("/console", cookieOf(response))).status, 303, "and ends the one it replaced");
  const home = await get("/console", cookieOf(again));
  t.equal(home.status, 200);
  const page = await home.text();
  t.match(page, "Overview");
  t.match(page, 'data-testid="search-form"');
  t.notMatch(page, admin, "the key is on no page");
  t.notOk(
    [...lines(), ...ingest.lines].some((line) => line.includes(admin)),
    "the key is in no log line",
  );
});

t.test("behind a TLS proxy (CONSOLE_TLS): the cookie is __Host-, Secure, Path=/ and no Domain", async (t) => {
  const behindTls = await consoleOver({ tls: true });
  const signedIn = await fetch(`${behindTls.url}/console/login`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", origin: behindTls.url },
    body: new URLSearchParams({ key: admin }),
  });
  t.equal(signedIn.status, 303);
  const setCookie = signedIn.headers.get("set-cookie") ?? "";
  t.match(setCookie, /^__Host-notify_console=[A-Za-z0-9_-]{43};/, "the __Host- prefix");
  for (const attribute of [/; Path=\/(;|$)/, /; Secure/, /; HttpOnly/, /; SameSite=Strict/])
    t.match(setCookie, attribute);
  t.notMatch(setCookie, /Domain=/i, "bound to the one host");
  const id = /^__Host-notify_console=([^;]*)/.exec(setCookie)?.[1] as string;
  const open = (cookie: string) =>
    fetch(`${behindTls.url}/console`, { redirect: "manual", headers: { cookie } }).then((r) => r.status);
  t.equal(await open(`__Host-notify_console=${id}`), 200, "the proxy passes the browser's cookie on");
  t.equal(await open(`notify_console=${id}`), 303, "the cookie without its prefix opens nothing");
  const page = await (
    await fetch(`${behindTls.url}/console/broadcasts`, { headers: { cookie: `__Host-notify_console=${id}` } })
  ).text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1] as string;
  const out = await fetch(`${behindTls.url}/console/logout`, {
    method: "POST",
    redirect: "manual",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      cookie: `__Host-notify_console=${id}`,
      origin: behindTls.url,
    },
    body: new URLSearchParams({ csrf }),
  });
  t.equal(out.status, 303);
  t.match(
    out.headers.get("set-cookie"),
    /^__Host-notify_console=;.*Max-Age=0.*Path=\/;.*Secure/i,
    "cleared as it was set",
  );
  t.equal(await open(`__Host-notify_console=${id}`), 303, "signed out");
});

t.test("without a session every page leads to the sign-in form", async (t) => {
  for (const path of ["/console", "/console/streams", "/console/notifications/x"]) {
    const response = await get(path);
    t.equal(response.status, 303, path);
    t.equal(response.headers.get("location"), "/console/login");
  }
  const forged = await get("/console", "A".repeat(43));
  t.equal(forged.status, 303, "an unknown session id is no session");
});

t.test("a key without the operator scope, an admin's too, or an unknown one is refused: no session", async (t) => {
  const lacking = await post("/console/login", { key: shop }, undefined, { origin: url });
  t.equal(lacking.status, 403);
  t.match(await lacking.text(), "lacks the operator scope");
  t.equal(lacking.headers.get("set-cookie"), null);
  const clientAdmin = await post("/console/login", { key: shopAdmin }, undefined, { origin: url });
  t.equal(clientAdmin.status, 403, "admin is a client's scope: the console is the deployment's");
  const refusal = await clientAdmin.text();
  t.match(refusal, "lacks the operator scope");
  t.match(refusal, "--scope operator", "the form says how to make an operator key");
  t.equal(clientAdmin.headers.get("set-cookie"), null);
  const unknown = await post("/console/login", { key: "nk_live_unknown" }, undefined, { origin: url });
  t.equal(unknown.status, 401);
  t.match(await unknown.text(), "unknown or revoked");
  t.equal(unknown.headers.get("set-cookie"), null);
  const empty = await post("/console/login", { key: "" }, undefined, { origin: url });
  t.equal(empty.status, 400);
});

t.test("failed sign-ins spend the address's pre-auth attempts; a valid key is never held back by them", async (t) => {
  // A console of its own, over the same API, with a throttle of 3 attempts.
  const strict = await consoleOver({ preauthThrottle: createAttemptThrottle({ perSecond: 0.001, burst: 3 }) });
  const attempt = (key: string) =>
    fetch(`${strict.url}/console/login`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ key }),
    });
  t.equal((await attempt("nk_wrong_1")).status, 401);
  t.equal((await attempt(shop)).status, 403, "a key lacking the scope is a failed sign-in too");
  t.equal((await attempt("nk_wrong_2")).status, 401);
  for (let i = 0; i < 200; i++) await attempt(`nk_wrong_more_${i}`);
  const spent = await attempt("nk_wrong_3");
  t.equal(spent.status, 429, "no attempt left: an unknown key is not even tried");
  t.ok(Number(spent.headers.get("retry-after")) >= 1, "with Retry-After");
  t.equal(spent.headers.get("set-cookie"), null);
  // The next attempt of this budget is 1,000 s away; at once is one call to the API, which runs
  // as a process of its own here, on a machine that may be busy, so the bound is loose.
  const AT_ONCE_MS = 10_000;
  let started = performance.now();
  const signedIn = await attempt(admin);
  t.equal(signedIn.status, 303, "the operator's own key still signs in from that address");
  t.ok(performance.now() - started < AT_ONCE_MS, `at once (${(performance.now() - started).toFixed(1)} ms)`);
  started = performance.now();
  const bearer = await fetch(`${strict.url}/console/streams`, {
    redirect: "manual",
    headers: { authorization: `Bearer ${admin}` },
  });
  t.equal(bearer.status, 200, "and a Bearer key from that address works");
  t.ok(performance.now() - started < AT_ONCE_MS, `at once (${(performance.now() - started).toFixed(1)} ms)`);
  const forged = await fetch(`${strict.url}/console/streams`, {
    redirect: "manual",
    headers: { authorization: `Bearer ${admin.slice(0, -3)}AAA` },
  });
  t.equal(forged.status, 429, "a forged signed key waits like any other key the API cannot vouch for");
});

t.test("sign-ins or Bearer keys sent in parallel cannot spend more attempts than the address has", async (t) => {
  const burst = 5;
  const strict = await consoleOver({ preauthThrottle: createAttemptThrottle({ perSecond: 0.001, burst }) });
  const signIns = await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      fetch(`${strict.url}/console/login`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ key: `nk_guess_${i}` }),
      }).then((r) => r.status),
    ),
  );
  t.ok(
    signIns.filter((s) => s === 401).length <= burst,
    `at most ${burst} keys tried (${signIns.filter((s) => s === 401).length}); the rest 429`,
  );
  t.equal(signIns.filter((s) => s !== 401 && s !== 429).length, 0);

  const other = await consoleOver({ preauthThrottle: createAttemptThrottle({ perSecond: 0.001, burst }) });
  const bearers = await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      fetch(`${other.url}/console/streams`, {
        redirect: "manual",
        headers: { authorization: `Bearer nk_guess_${i}` },
      }).then((r) => r.status),
    ),
  );
  t.ok(bearers.filter((s) => s === 401).length <= burst, "the same for Bearer keys");
});

t.test("security headers on every console answer: pages, the stylesheet, redirects, refusals", async (t) => {
  const cookie = await signIn();
  const answers = [
    await get("/console/login"),
    await get("/console/console.css"),
    await get("/console"),
    await get("/console", cookie),
    await get("/console/no-such-page", cookie),
    await post("/console/logout", {}, cookie),
  ];
  for (const response of answers) {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) {
      t.equal(response.headers.get(name), value, `${response.url} ${response.status}: ${name}`);
    }
  }
  t.equal(
    SECURITY_HEADERS["content-security-policy"],
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  );
  const css = await get("/console/console.css");
  t.match(css.headers.get("content-type"), /^text\/css/);
  const page = await (await get("/console", cookie)).text();
  t.notMatch(page, /<script/i, "no script at all");
  t.notMatch(page, /style="/, "no inline style (the CSP would drop it)");
  t.match(page, '<link rel="stylesheet" href="/console/console.css">');
});

t.test("a POST needs the session's CSRF token and a same-origin Origin", async (t) => {
  const cookie = await signIn();
  const csrf = await csrfOf(cookie);
  const none = await post("/console/logout", {}, cookie);
  t.equal(none.status, 403, "no token");
  const wrong = await post("/console/logout", { csrf: `${csrf.slice(0, -1)}x` }, cookie);
  t.equal(wrong.status, 403, "a wrong token");
  const other = await signIn();
  const foreign = await post("/console/logout", { csrf: await csrfOf(other) }, cookie);
  t.equal(foreign.status, 403, "another session's token");
  const crossOrigin = await post("/console/logout", { csrf }, cookie, { origin: "http://evil.example" });
  t.equal(crossOrigin.status, 403, "a cross-origin Origin");
  t.match(await crossOrigin.text(), "Cross-origin request refused");
  const otherPort = await post("/console/logout", { csrf }, cookie, { origin: url.replace(/:\d+$/, ":1") });
  t.equal(otherPort.status, 403, "another port of the same host is another origin");
  const opaque = await post("/console/logout", { csrf }, cookie, { origin: "null" });
  t.equal(opaque.status, 403, "an opaque origin, with no Sec-Fetch-Site to vouch for it");
  const sameSite = await post("/console/logout", { csrf }, cookie, { "sec-fetch-site": "same-site" });
  t.equal(sameSite.status, 403, "same-site is not same-origin (another port of the host)");
  const crossSite = await post("/console/logout", { csrf }, cookie, { "sec-fetch-site": "cross-site" });
  t.equal(crossSite.status, 403, "a browser's Sec-Fetch-Site: cross-site");
  const crossLogin = await post("/console/login", { key: admin }, undefined, { origin: "http://evil.example" });
  t.equal(crossLogin.status, 403, "a sign-in posted from elsewhere");
  t.equal((await get("/console", cookie)).status, 200, "none of them ended the session");
  // What Chromium sends for the console's own form under Referrer-Policy: no-referrer.
  const done = await post("/console/logout", { csrf }, cookie, { origin: "null", "sec-fetch-site": "same-origin" });
  t.equal(done.status, 303, "the right token from the same origin is taken");
});

t.test("sign-out ends the session on the server, not only in the browser", async (t) => {
  const cookie = await signIn();
  const response = await post("/console/logout", { csrf: await csrfOf(cookie) }, cookie, { origin: url });
  t.equal(response.status, 303);
  t.equal(response.headers.get("location"), "/console/login");
  t.match(response.headers.get("set-cookie"), /notify_console=;.*Max-Age=0/i, "the cookie is cleared");
  const after = await get("/console", cookie);
  t.equal(after.status, 303, "the old cookie opens nothing");
  t.equal(after.headers.get("location"), "/console/login");
});

t.test("a Bearer operator key works without a session (scripts); an unknown one is refused", async (t) => {
  const response = await get("/console/notifications", undefined, { authorization: `Bearer ${admin}` });
  t.equal(response.status, 200);
  t.equal(response.headers.get("set-cookie"), null, "no session is made");
  const page = await response.text();
  t.notMatch(page, 'data-testid="logout"', "nothing to sign out of");
  // The key is the API's to judge: a page that calls it (a search form alone shows no data).
  const unknown = await get("/console/streams", undefined, { authorization: "Bearer nk_unknown" });
  t.equal(unknown.status, 401);
  const reader = await get("/console/notifications?user_id=u", undefined, { authorization: `Bearer ${shop}` });
  t.equal(reader.status, 403, "a key without the operator scope");
  const clientAdmin = await get("/console/streams", undefined, { authorization: `Bearer ${shopAdmin}` });
  t.equal(clientAdmin.status, 403, "nor a client's admin key");
});

t.test("search finds a notification by id and by user; its page shows channels and the timeline", async (t) => {
  const cookie = await signIn();
  const first = await notify("ada");
  const second = await notify("ada");
  const byId = await get(`/console/notifications?notification_id=${first}`, cookie);
  t.equal(byId.status, 200);
  const idPage = await byId.text();
  t.match(idPage, `data-testid="notification-${first}"`);
  t.notMatch(idPage, `data-testid="notification-${second}"`);
  t.match(idPage, `href="/console/notifications/${first}"`);

  const byUser = await (await get("/console/notifications?user_id=ada", cookie)).text();
  t.match(byUser, `data-testid="notification-${first}"`);
  t.match(byUser, `data-testid="notification-${second}"`);
  t.ok(byUser.indexOf(second) < byUser.indexOf(first), "newest first");

  const nothing = await (await get(`/console/notifications?notification_id=${randomUUID()}`, cookie)).text();
  t.match(nothing, 'data-testid="no-results"');

  const ref = { notification_id: first, channel: "email" as const };
  await database.sql`insert into notification_channels (notification_id, channel, status) values (${first}, 'email', 'pending')`;
  await moveStatus(database.sql, ref, "retrying", {
    reason: "sendgrid 503",
    attempts: 1,
    attempt: { attempt: 1, provider: "sendgrid", outcome: "transient", providerId: null, error: "sendgrid 503" },
  });
  await moveStatus(database.sql, ref, "delivered", {
    provider: "smtp",
    providerId: "m-1",
    attempts: 2,
    attempt: { attempt: 2, provider: "smtp", outcome: "accepted", providerId: "m-1", error: null },
  });
  const trace = "4bf92f3577b34da6a3ce929d0e0e4736";
  await database.sql`update notifications set trace_parent = ${`00-${trace}-00f067aa0ba902b7-01`} where id = ${first}`;
  const detail = await get(`/console/notifications/${first}`, cookie);
  t.equal(detail.status, 200);
  const page = await detail.text();
  t.match(page, 'data-testid="channels"');
  t.match(page, /data-testid="channel-status-email"><span class="status-delivered">delivered</);
  t.match(page, 'data-testid="timeline"');
  const rows = page.split('data-testid="timeline-entry"').length - 1;
  t.ok(rows >= 5, `one row per entry (accepted, 2 attempts, 2 statuses...): ${rows}`);
  t.match(page, "attempt 1");
  t.match(page, "sendgrid 503");
  t.match(page, "sendgrid → smtp");
  t.match(page, `data-testid="notification-client">shop<`);
  t.match(page, `href="http://localhost:16686/trace/${trace}"`, "the trace id links to the trace viewer");

  const missing = await get(`/console/notifications/${randomUUID()}`, cookie);
  t.equal(missing.status, 404, "an API 404 is a 404 page");
  const text = await missing.text();
  t.match(text, 'data-testid="error"');
  t.notMatch(text, /at .*\.(ts|js):\d+/, "never a stack");
});

t.test("what a notification carries is shown escaped, never as markup", async (t) => {
  const cookie = await signIn();
  const id = await notify(EVIL_USER);
  await database.sql`update notifications set category = ${EVIL} where id = ${id}`;
  await database.sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'email', 'pending')`;
  await moveStatus(database.sql, { notification_id: id, channel: "email" }, "failed", {
    reason: `bounced: ${EVIL}`,
    attempts: 1,
    attempt: { attempt: 1, provider: "sendgrid", outcome: "permanent", providerId: null, error: EVIL },
  });
  for (const path of [
    `/console/notifications/${id}`,
    `/console/notifications?user_id=${encodeURIComponent(EVIL_USER)}`,
    `/console/notifications?notification_id=${encodeURIComponent(EVIL)}`,
  ]) {
    const response = await get(path, cookie);
    const page = await response.text();
    t.notMatch(page, "<script", `${path}: no script element`);
    t.notMatch(page, "<i>", `${path}: no markup from data`);
  }
  const page = await (await get(`/console/notifications/${id}`, cookie)).text();
  t.match(page, "&lt;script&gt;alert(1)&lt;/script&gt;", "the category is shown, escaped");
  t.match(page, "&lt;i&gt;&quot;u1&#39;&lt;/i&gt;", "the user id too, quotes included");
  t.match(page, "bounced: &lt;script&gt;", "and a reason");
});

t.test("a notification's send time and its digest are shown, the digest's key escaped", async (t) => {
  const cookie = await signIn();
  const id = await notify("sched-user");
  await database.sql`update notifications set send_at = '2027-03-14T07:00:00Z',
    send_at_local = ${database.sql.json({ time: "02:30", date: "2027-03-14" })} where id = ${id}`;
  const { digestId } = await joinDigest(database, {
    notificationId: id,
    clientId: "shop",
    userId: "sched-user",
    templateId: "welcome",
    key: EVIL,
    windowMs: 60_000,
    maxItems: 5,
    now: new Date(),
  });
  const page = await (await get(`/console/notifications/${id}`, cookie)).text();
  t.match(page, /data-testid="notification-send-at"><time datetime="2027-03-14T07:00:00.000Z">/);
  t.match(page, "(02:30 on 2027-03-14 the user's time)");
  t.match(
    page,
    /data-testid="notification-digest"><code>&lt;script&gt;alert\(1\)&lt;\/script&gt;<\/code> · open · 1 item/,
  );
  t.notMatch(page, "<script>", "the key is never markup");
  const digestNotification = randomUUID();
  await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition, digest_of)
    values (${digestNotification}, 'shop', 'sched-user', 'account', 'welcome', 'transactional', '{}', ${digestNotification}, 'digest', 0, ${digestId})`;
  await database.sql`update digests set status = 'sent', notification_id = ${digestNotification} where id = ${digestId}`;
  const sent = await (await get(`/console/notifications/${id}`, cookie)).text();
  t.match(sent, `href="/console/notifications/${digestNotification}"`, "links the digest's own notification");
  const own = await (await get(`/console/notifications/${digestNotification}`, cookie)).text();
  t.match(own, "this is the digest&#39;s notification");
});

t.test("a revoked key ends its session at the next page", async (t) => {
  const key = await seedApiKey(database, { clientId: "ops", name: "short-lived", scopes: ["operator"] });
  const cookie = await signIn(key);
  t.equal((await get("/console/notifications", cookie)).status, 200);
  await database.sql`update api_keys set revoked_at = now() where name = 'short-lived'`;
  const refused = await get("/console/notifications?user_id=ada", cookie);
  t.equal(refused.status, 401);
  const page = await refused.text();
  t.match(page, "revoked");
  t.match(page, 'action="/console/login"', "back to the sign-in form");
  t.match(refused.headers.get("set-cookie"), /notify_console=;.*Max-Age=0/i);
  const after = await get("/console", cookie);
  t.equal(after.status, 303, "the session is gone");
  t.equal(after.headers.get("location"), "/console/login");
});

t.test("dead letters: filters, a checkbox per letter, a dry run's diff, a replay's results", async (t) => {
  const cookie = await signIn();
  const letter = (n: number): DeadLetter => ({
    version: 1,
    class: "permanent",
    reason: `hard bounce ${EVIL}`,
    channel: "email",
    lane: "transactional",
    provider: "sendgrid",
    attempts: 1,
    notification: null,
    item: {
      notification_id: `dl-n-${n}`,
      channel: "email",
      priority: "transactional",
      user_id: `dl-u-${n}`,
      category: "account",
      to: `old-${n}@example.com`,
      subject: null,
      body: "b",
      attempt: 1,
    },
    history: [],
    dead_lettered_at: new Date().toISOString(),
  });
  for (const n of [1, 2]) await bus.publish(bus.subjects.dlq("email"), letter(n), `console-dl-${n}`);
  const list = await get("/console/dead-letters?channel=email", cookie);
  t.equal(list.status, 200);
  const page = await list.text();
  t.match(page, 'data-testid="dead-letters"');
  t.notMatch(page, "<script");
  const seqs = [...page.matchAll(/data-testid="dead-letter-(\d+)"/g)].map((m) => m[1] as string);
  t.equal(seqs.length, 2, "one row per letter");
  for (const seq of seqs) t.match(page, `name="seq" value="${seq}"`);
  t.match(page, 'data-testid="dry-run"');
  t.match(page, 'data-testid="replay-selected"');

  const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1] as string;
  const none = await post("/console/dead-letters/replay", { csrf, action: "dry_run" }, cookie);
  t.equal(none.status, 400, "nothing selected");

  const dry = await post("/console/dead-letters/replay", { csrf, action: "dry_run", seq: seqs }, cookie);
  const dryPage = await dry.text();
  if (dry.status === 404 && dryPage.includes("no route")) {
    t.fail("POST /api/v1/dead-letters/replay is not there yet");
    return;
  }
  t.equal(dry.status, 200);
  t.match(dryPage, 'data-testid="replay-diff"');
  for (const seq of seqs) t.match(dryPage, `data-testid="replay-diff-${seq}"`);
  t.match(dryPage, 'data-testid="replay-these"');

  // Post/redirect/get: a reload of the results page must not post the replay again.
  const replayed = await post("/console/dead-letters/replay", { csrf, action: "replay", seq: seqs }, cookie);
  t.equal(replayed.status, 303);
  t.equal(replayed.headers.get("location"), "/console/dead-letters/replayed");
  const results = await (await get("/console/dead-letters/replayed", cookie)).text();
  t.equal(results.split('data-testid="replay-result"').length - 1, 2, "one result per letter");
  t.match(results, 'data-testid="replay-summary"');
  const reloaded = await (await get("/console/dead-letters/replayed", cookie)).text();
  t.match(reloaded, 'data-testid="no-replay"', "shown once: a reload replays nothing and shows nothing");
});

t.test("the other pages answer for a signed-in operator", async (t) => {
  const cookie = await signIn();
  const streams = await get("/console/streams?refresh=5", cookie);
  t.equal(streams.status, 200);
  const streamsPage = await streams.text();
  t.match(streamsPage, '<meta http-equiv="refresh" content="5">');
  t.match(streamsPage, 'data-testid="streams"');
  const providers = await get("/console/providers", cookie);
  t.equal(providers.status, 200);
  t.match(await providers.text(), /data-testid="providers"|data-testid="error"/);
  const broadcasts = await get("/console/broadcasts", cookie);
  t.equal(broadcasts.status, 200);
  t.match(await broadcasts.text(), /data-testid="(broadcasts|no-broadcasts)"/);
  const home = await (await get("/console", cookie)).text();
  for (const card of ["summary-streams", "summary-providers", "summary-dead-letters", "summary-broadcasts"]) {
    t.match(home, `data-testid="${card}"`);
  }
});

t.test("webhooks: every client's endpoints, their figures, and an alert for one the service disabled", async (t) => {
  const cookie = await signIn();
  const empty = await (await get("/console/webhooks", cookie)).text();
  t.match(empty, 'data-testid="webhooks-empty"');
  const created = await api.request("/api/v1/webhook-endpoints", {
    method: "POST",
    headers: { "x-api-key": shopAdmin, "content-type": "application/json" },
    body: JSON.stringify({ url: "https://hooks.example.com/<b>shop</b>" }),
  });
  t.equal(created.status, 201);
  const { id } = (await created.json()) as { id: string };
  await database.sql`update webhook_endpoints set status = 'disabled', disabled_reason = 'failing',
    disabled_at = now(), failing_since = now() - interval '6 days' where id = ${id}`;
  const page = await (await get("/console/webhooks", cookie)).text();
  t.match(page, `data-testid="webhook-${id}"`);
  t.match(page, 'data-testid="webhooks-disabled"', "the disabled endpoint is called out");
  t.match(page, "every attempt failed for too long");
  t.notMatch(page, "<b>shop</b>", "the URL is shown escaped");
  t.notMatch(page, "whsec_", "never a secret");

  // Its dead letters, and the form that posts them again.
  await database.sql`update webhook_endpoints set status = 'enabled' where id = ${id}`;
  const [event] = await database.sql`
    insert into webhook_events (client_id, type, data) values ('shop', 'channel.failed', '{}') returning id`;
  await database.sql`update webhook_deliveries set status = 'dead', attempts = 10, last_error = 'HTTP 500'
    where endpoint_id = ${id}`;
  const endpointPage = await (await get(`/console/webhooks/${id}`, cookie)).text();
  t.match(endpointPage, `data-testid="webhook-dead-evt_${event?.id}"`);
  const csrf = await csrfOf(cookie, `/console/webhooks/${id}`);
  const replayed = await post(`/console/webhooks/${id}/replay`, { csrf, event_id: `evt_${event?.id}` }, cookie, {
    origin: url,
  });
  t.equal(replayed.status, 303);
  const [row] = await database.sql`select status, attempts from webhook_deliveries where endpoint_id = ${id}`;
  t.match(row, { status: "waiting", attempts: 0 }, "owed again");
  t.match(await (await get(`/console/webhooks/${id}`, cookie)).text(), "1 event(s) owed again");
});

t.test("an API error is a readable message: a 503 says the dependency is unavailable", async (t) => {
  // The rendering only: an API that answers every call as an outage would.
  const outage = createAdminApp(captureLogger("console").log, {}, () => false);
  mountConsole(outage, {
    api: {
      request: () =>
        new Response(
          JSON.stringify({
            type: "about:blank",
            title: "Service Unavailable",
            status: 503,
            detail: "nats is unavailable",
            code: "dependency_unavailable",
          }),
          { status: 503, headers: { "content-type": "application/problem+json", "retry-after": "2" } },
        ),
    },
    preauthThrottle: createAttemptThrottle({ perSecond: 2, burst: 60 }),
  });
  const response = await outage.request("/console/streams", { headers: { authorization: `Bearer ${admin}` } });
  t.equal(response.status, 503);
  const page = await response.text();
  t.match(page, "Dependency unavailable, retry: nats is unavailable; retry in 2 s");
  const login = await outage.request("/console/login", {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ key: admin }),
  });
  t.equal(login.status, 503, "a sign-in during an outage says so");
  t.equal(login.headers.get("set-cookie"), null);
});

t.test("broadcasts: progress and Pause / Resume / Cancel, each a CSRF-checked form", async (t) => {
  const cookie = await signIn();
  await seedTemplate(database, {
    id: "promo",
    params: [],
    variants: [{ channel: "email", locale: "en", subject: "Hi", body: "Hi" }],
  });
  await database.sql`insert into audiences (id, name) values ('console-aud', 'all')`;
  await database.sql`insert into audience_members (audience_id, user_id) values ('console-aud', 'b-1'), ('console-aud', 'b-2')`;
  const owner = await seedApiKey(database, { clientId: "shop", name: "shop admin", scopes: ["admin"] });
  const created = await api.request("/api/v1/broadcasts", {
    method: "POST",
    headers: { "x-api-key": owner, "content-type": "application/json", "idempotency-key": randomUUID() },
    body: JSON.stringify({ audience_id: "console-aud", category: "deals", template_id: "promo", data: {} }),
  });
  t.equal(created.status, 202);
  const { broadcast_id: id } = (await created.json()) as { broadcast_id: string };

  const list = await (await get("/console/broadcasts", cookie)).text();
  t.match(list, `data-testid="broadcast-${id}"`);
  t.match(list, new RegExp(`data-testid="broadcast-status-${id}"><span class="status-expanding">expanding<`));
  t.match(list, `data-testid="pause-${id}"`);
  t.notMatch(list, `data-testid="resume-${id}"`, "no Resume for a broadcast that is not paused");
  const csrf = /name="csrf" value="([^"]+)"/.exec(list)?.[1] as string;

  t.equal((await post(`/console/broadcasts/${id}/pause`, {}, cookie)).status, 403, "no token, no pause");
  const paused = await post(`/console/broadcasts/${id}/pause`, { csrf }, cookie, { origin: url });
  t.equal(paused.status, 303);
  t.equal(paused.headers.get("location"), "/console/broadcasts");
  const after = await (await get("/console/broadcasts", cookie)).text();
  t.match(after, /data-testid="notice">Broadcast .* pause done, now paused\.</);
  t.match(after, `data-testid="resume-${id}"`);
  t.notMatch(
    await (await get("/console/broadcasts", cookie)).text(),
    'data-testid="notice"',
    "the notice is shown once",
  );

  t.equal((await post(`/console/broadcasts/${id}/resume`, { csrf }, cookie)).status, 303);
  t.equal((await post(`/console/broadcasts/${id}/cancel`, { csrf }, cookie)).status, 303);
  t.match(
    await (await get("/console/broadcasts?status=cancelled", cookie)).text(),
    new RegExp(`data-testid="broadcast-status-${id}"><span class="status-cancelled">cancelled<`),
  );
  const missing = await post(`/console/broadcasts/${randomUUID()}/cancel`, { csrf }, cookie);
  t.equal(missing.status, 404);
  t.match(await missing.text(), 'data-testid="error"');
});
