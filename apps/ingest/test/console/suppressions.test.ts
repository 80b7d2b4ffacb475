import { addSuppressions, type SuppressionEntry, seedApiKey } from "@notify/db";
import { createAttemptThrottle } from "@notify/http";
import { freshBus, freshDatabase } from "@notify/testing";
import t from "tap";
import { apiAt, consoleApp, startIngest } from "./support.js";

// The console's Suppressions page driven over HTTP as a browser would (cookies, forms, redirects
// by hand), against the real API (ingest, its own process) on a real database and NATS.
const { url: databaseUrl, database } = await freshDatabase(t);
const bus = await freshBus(t);
const ingest = await startIngest(
  t,
  { databaseUrl, namespace: bus.naming.namespace, partitions: bus.naming.partitions },
  { AUTH_CACHE_TTL_SECONDS: "0", CONSOLE_ENABLED: "false" },
);
const admin = await seedApiKey(database, { clientId: "ops", name: "operator", scopes: ["operator"] });
const { url } = await consoleApp(t, {
  api: apiAt(ingest.url),
  preauthThrottle: createAttemptThrottle({ perSecond: 2, burst: 60 }),
  vouches: (key) => key === admin,
});

const EVIL = `<script>alert(1)</script>`;

const get = (path: string, cookie: string) =>
  fetch(`${url}${path}`, { redirect: "manual", headers: { cookie: `notify_console=${cookie}` } });

const post = (path: string, form: Record<string, string>, cookie: string) =>
  fetch(`${url}${path}`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie: `notify_console=${cookie}`, origin: url },
    body: new URLSearchParams(form),
  });

async function signIn(): Promise<string> {
  const response = await fetch(`${url}/console/login`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", origin: url },
    body: new URLSearchParams({ key: admin }),
  });
  const cookie = /notify_console=([^;]*)/.exec(response.headers.get("set-cookie") ?? "")?.[1];
  if (response.status !== 303 || !cookie) throw new Error(`sign-in answered ${response.status}`);
  return cookie;
}

const cookie = await signIn();
const page = async (path: string) => {
  const response = await get(path, cookie);
  return { status: response.status, text: await response.text() };
};
const csrf = /name="csrf" value="([^"]+)"/.exec((await page("/console/suppressions")).text)?.[1] ?? "";

/** The rows of the page's table, each as its text without tags. */
const rowsOf = (text: string) =>
  [...text.matchAll(/<tr data-testid="suppression-entry">([\s\S]*?)<\/tr>/g)].map((m) =>
    (m[1] ?? "")
      .replace(/<[^>]*>/g, " ")
      .replace(/\s+/g, " ")
      .trim(),
  );

const entries = () =>
  database.sql<SuppressionEntry[]>`
    select channel, address, client_id, reason, source from suppressions order by channel, address, client_id`;

t.test("linked from the navigation; every client's entries with reason, scope, source and time, escaped", async (t) => {
  await addSuppressions(database, [
    {
      channel: "email",
      address: "bounced@example.com",
      client_id: "",
      reason: "hard_bounce",
      source: { provider: "sendgrid", event: "bounce", event_id: EVIL, notification_id: "n-1" },
    },
    { channel: "email", address: `${EVIL}@example.com`, client_id: "shop", reason: "manual", source: { note: EVIL } },
    { channel: "sms", address: "+14155550100", client_id: "blog", reason: "carrier_opt_out", source: {} },
  ]);
  t.match((await page("/console")).text, '<a href="/console/suppressions">Suppressions</a>');
  const { status, text } = await page("/console/suppressions");
  t.equal(status, 200);
  t.match(text, 'aria-current="page">Suppressions');
  t.notMatch(text, EVIL, "nothing from an entry is markup");
  t.match(text, "&lt;script&gt;alert(1)&lt;/script&gt;@example.com");
  const rows = rowsOf(text);
  t.equal(rows.length, 3);
  t.ok(
    rows.some((r) =>
      /^email bounced@example\.com every client hard_bounce sendgrid bounce · event .* · n-1 — \d{4}-/.test(r),
    ),
    "a provider's report: for every client, its provider, event and notification, and when",
  );
  t.match(text, 'href="/console/notifications/n-1"');
  t.ok(rows.some((r) => r.startsWith("sms +14155550100 client blog carrier_opt_out")));
  t.ok(rows.some((r) => r.includes("client shop manual")));
});

t.test("search by address or its start, filter by channel, reason and client", async (t) => {
  const addresses = async (query: string) =>
    rowsOf((await page(`/console/suppressions?${query}`)).text).map((r) => r.split(" ")[1]);
  t.same(await addresses("address=BOUNCED@example.com"), ["bounced@example.com"], "an address, as kept");
  t.same(await addresses("address=%2B1415"), ["+14155550100"], "a prefix");
  t.same(await addresses("channel=sms"), ["+14155550100"]);
  t.same(await addresses("reason=hard_bounce"), ["bounced@example.com"]);
  const shop = await addresses("client=shop");
  t.equal(shop.length, 2, "a client's own entries and those for every client");
  t.notOk(shop.includes("+14155550100"), "not another client's");
  t.match((await page("/console/suppressions?address=nobody")).text, 'data-testid="no-suppressions"');
  const refused = await page("/console/suppressions?cursor=forged");
  t.equal(refused.status, 400, "the API's problem, as the page's");
  t.match(refused.text, 'data-testid="error"');
});

t.test("pages of 100, newest first, with a link to the older ones", async (t) => {
  await addSuppressions(
    database,
    Array.from({ length: 120 }, (_, i) => ({
      channel: "email" as const,
      address: `many${i}@example.com`,
      client_id: "",
      reason: "unsubscribe" as const,
      source: {},
    })),
  );
  const first = await page("/console/suppressions?reason=unsubscribe");
  t.equal(rowsOf(first.text).length, 100);
  const older = /href="([^"]+)" data-testid="suppressions-older"/.exec(first.text)?.[1]?.replaceAll("&amp;", "&");
  t.ok(older?.includes("reason=unsubscribe"), "the filters go along");
  const second = await page(older ?? "");
  t.equal(rowsOf(second.text).length, 20);
  t.notMatch(second.text, "suppressions-older");
  await database.sql`delete from suppressions where reason = 'unsubscribe'`;
});

t.test("the form adds an entry through the API; a bad address adds nothing", async (t) => {
  const added = await post(
    "/console/suppressions/add",
    { csrf, channel: "email", address: " New@Example.com ", reason: "manual", note: EVIL, scope: "all_clients" },
    cookie,
  );
  t.equal(added.status, 303);
  t.equal(added.headers.get("location"), "/console/suppressions?address=new%40example.com&channel=email");
  const shown = await page(added.headers.get("location") ?? "");
  t.match(shown.text, /data-testid="notice">email new@example.com suppressed \(manual\)/);
  t.ok(rowsOf(shown.text)[0]?.startsWith("email new@example.com every client manual key"));
  t.notMatch(shown.text, EVIL);
  const entry = (await entries()).find((e) => e.address === "new@example.com");
  t.match(entry, { client_id: "", reason: "manual", source: { note: EVIL, key_id: String } }, "the key that added it");

  const again = await post(
    "/console/suppressions/add",
    { csrf, channel: "email", address: "new@example.com", reason: "spam_complaint", scope: "all_clients" },
    cookie,
  );
  t.match((await page(again.headers.get("location") ?? "")).text, "was on the list already (manual)");

  const own = await post(
    "/console/suppressions/add",
    { csrf, channel: "sms", address: "+1 415 555 0199", reason: "manual", scope: "client" },
    cookie,
  );
  t.equal(own.status, 303);
  t.match(
    (await entries()).find((e) => e.address === "+14155550199"),
    { client_id: "ops" },
    "scope client: the key's own client",
  );

  const before = (await entries()).length;
  for (const [form, status, message] of [
    [{ channel: "email", address: "not an address" }, 400, "not an email address"],
    [{ channel: "email", address: ".." }, 400, "An address is required"],
    [{ channel: "push", address: "x" }, 400, "Channel must be one of"],
    [{ channel: "email", address: "a@example.com", reason: "bored" }, 400, "reason must be one of"],
    [{ channel: "email", address: "a@example.com", note: "x".repeat(501) }, 400, "note must be at most 500"],
  ] as const) {
    const refused = await post("/console/suppressions/add", { csrf, scope: "all_clients", ...form }, cookie);
    t.equal(refused.status, status, JSON.stringify(form).slice(0, 60));
    t.match(await refused.text(), message);
  }
  const forged = await post("/console/suppressions/add", { channel: "email", address: "x@example.com" }, cookie);
  t.equal(forged.status, 403, "no CSRF token, nothing done");
  t.equal((await entries()).length, before, "nothing added");
});

t.test("the remove button lifts an entry through the API, and says who else can", async (t) => {
  const listed = (await page("/console/suppressions?address=bounced")).text;
  t.match(listed, 'name="scope" value="all_clients"');
  t.match(listed, /<input name="note" maxlength="500"[^>]*data-testid="suppression-remove-note">/, "a note field");
  const remove = { csrf, channel: "email", address: "bounced@example.com", scope: "all_clients", client_id: "" };
  // A note the API refuses removes nothing, and the page says why.
  const tooLong = await post("/console/suppressions/remove", { ...remove, note: "x".repeat(501) }, cookie);
  t.equal(tooLong.status, 400);
  t.match(await tooLong.text(), "note must be at most 500 characters");
  t.ok(
    (await entries()).some((e) => e.address === "bounced@example.com"),
    "still there",
  );

  const logged = ingest.lines.length;
  const removed = await post(
    "/console/suppressions/remove",
    { ...remove, note: ` the user fixed their mailbox ${EVIL} `, f_address: "bounced" },
    cookie,
  );
  t.equal(removed.status, 303);
  t.equal(removed.headers.get("location"), "/console/suppressions?address=bounced", "back to the same list");
  const after = await page(removed.headers.get("location") ?? "");
  t.match(after.text, "email bounced@example.com removed from every client&#39;s list.");
  t.notOk((await entries()).some((e) => e.address === "bounced@example.com"));
  const [key] = await database.sql<{ id: string }[]>`select id from api_keys where client_id = 'ops'`;
  t.ok(key?.id, "the operator's key");
  const line = ingest.lines
    .slice(logged)
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .find((l) => l.msg === "suppression removed");
  t.match(
    line,
    { key_id: key?.id, scope: "all_clients", note: `the user fixed their mailbox ${EVIL}` },
    "the API logged the note, trimmed, with the operator's key",
  );

  const theirs = await post(
    "/console/suppressions/remove",
    { csrf, channel: "sms", address: "+14155550100", scope: "client", client_id: "blog" },
    cookie,
  );
  t.equal(theirs.status, 404);
  const text = await theirs.text();
  t.match(text, "notify suppressions remove sms +14155550100 --client blog");
  t.ok(
    (await entries()).some((e) => e.address === "+14155550100"),
    "another client's entry stays",
  );

  const own = await post(
    "/console/suppressions/remove",
    { csrf, channel: "sms", address: "+14155550199", scope: "client", client_id: "ops" },
    cookie,
  );
  t.equal(own.status, 303, "the key's own client's entry");
  t.notOk((await entries()).some((e) => e.address === "+14155550199"));

  const bad = await post("/console/suppressions/remove", { csrf, channel: "email", address: "..", scope: "x" }, cookie);
  t.equal(bad.status, 400);
});
