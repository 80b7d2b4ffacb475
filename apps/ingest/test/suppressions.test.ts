import { addSuppressions, seedApiKey } from "@notify/db";
import { createMetrics } from "@notify/http";
import fc from "fast-check";
import t, { type Test } from "tap";
import { ingestApp } from "./support.js";

// The suppressions API through app.request(), on a real Postgres database: the contacts scope
// manages a client's own entries and reads those that hold for it; only an operator key touches
// the entries that hold for every client or reads another client's; bad input is a problem that
// writes nothing; the first entry is kept; the list filters and pages.
const metrics = createMetrics("ingest");
const { app, database, lines } = await ingestApp(t, { metrics, maxBodyBytes: 8192 });
const shop = await seedApiKey(database, { clientId: "shop", name: "shop contacts", scopes: ["contacts"] });
const shopAdmin = await seedApiKey(database, { clientId: "shop", name: "shop admin", scopes: ["admin"] });
const shopRead = await seedApiKey(database, { clientId: "shop", name: "shop read", scopes: ["read", "ingest"] });
const blog = await seedApiKey(database, { clientId: "blog", name: "blog contacts", scopes: ["contacts"] });
const operator = await seedApiKey(database, { clientId: "ops", name: "operator", scopes: ["operator"] });

const call = (method: string, path: string, key: string, body?: unknown) =>
  app.request(`/api/v1${path}`, {
    method,
    headers: { "x-api-key": key, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });

async function expectProblem(t: Test, response: Response, status: number, code: string) {
  t.equal(response.status, status, `status ${status}`);
  t.equal(response.headers.get("content-type"), "application/problem+json");
  const body = (await response.json()) as { code: string; detail?: string };
  t.match(body, { status, code });
  return body;
}

interface EntryView {
  channel: string;
  address: string;
  scope: string;
  client_id: string | null;
  reason: string;
  source: Record<string, string>;
  created_at: string;
}
interface Page {
  data: EntryView[];
  next_cursor: string | null;
}

const rows = async () => Number((await database.sql`select count(*) from suppressions`)[0]?.count);
const path = (channel: string, address: string) => `/suppressions/${channel}/${encodeURIComponent(address)}`;

t.test("the contacts scope (or admin, or operator) is needed", async (t) => {
  await expectProblem(t, await call("GET", "/suppressions", shopRead), 403, "insufficient_scope");
  await expectProblem(t, await call("PUT", path("email", "x@example.com"), shopRead), 403, "insufficient_scope");
  t.equal((await call("GET", "/suppressions", shop)).status, 200);
  t.equal((await call("GET", "/suppressions", shopAdmin)).status, 200);
  t.equal(await rows(), 0);
});

t.test("PUT adds a client entry with its key; a second PUT keeps the first", async (t) => {
  const first = await call("PUT", path("email", "  Ada@Example.COM "), shop, { reason: "unsubscribe", note: "asked" });
  t.equal(first.status, 201);
  const entry = (await first.json()) as EntryView;
  t.match(entry, {
    channel: "email",
    address: "ada@example.com",
    scope: "client",
    client_id: "shop",
    reason: "unsubscribe",
    source: { note: "asked", key_id: String },
  });
  t.ok(!Number.isNaN(Date.parse(entry.created_at)));

  const again = await call("PUT", path("email", "ada@example.com"), shop, { reason: "manual", note: "other" });
  t.equal(again.status, 200);
  t.same(await again.json(), entry, "the first entry, unchanged");

  const slashed = await call("PUT", path("email", "a/b%c@example.com"), shop);
  t.equal(slashed.status, 201, "an address with / and % in it, URL-encoded");
  t.match(await (await call("GET", path("email", "A/B%c@example.com"), shop)).json(), {
    address: "a/b%c@example.com",
  });
  const bare = await call("PUT", path("sms", "+1 (415) 555-0100"), shop);
  t.equal(bare.status, 201, "the body is optional");
  t.match(await bare.json(), { channel: "sms", address: "+14155550100", reason: "manual" });
  const counted = await metrics.registry.getSingleMetricAsString("notify_api_suppressions_added_total");
  t.match(counted, /notify_api_suppressions_added_total\{reason="unsubscribe"\} 1(\n|$)/, "counted once, by reason");
  t.match(counted, /notify_api_suppressions_added_total\{reason="manual"\} 2(\n|$)/);
});

t.test("bad input is a 4xx problem and writes nothing", async (t) => {
  const before = await rows();
  const bad: Array<[string, string, unknown, number, string]> = [
    ["PUT", path("email", "not-an-address"), {}, 400, "validation_failed"],
    ["PUT", path("email", "@example.com"), {}, 400, "validation_failed"],
    ["PUT", path("email", "a b@example.com"), {}, 400, "validation_failed"],
    ["PUT", path("email", `${"a".repeat(320)}@example.com`), {}, 400, "validation_failed"],
    ["PUT", path("sms", "0123"), {}, 400, "validation_failed"],
    ["PUT", path("sms", "ada@example.com"), {}, 400, "validation_failed"],
    ["PUT", path("push", "x"), {}, 404, "not_found"],
    ["PUT", path("in_app", "u1"), {}, 404, "not_found"],
    ["PUT", path("email", "ok@example.com"), { reason: "because" }, 400, "validation_failed"],
    ["PUT", path("email", "ok@example.com"), { note: "x".repeat(501) }, 400, "validation_failed"],
    ["PUT", path("email", "ok@example.com"), { note: "a\u0000b" }, 400, "validation_failed"],
    ["PUT", path("email", "ok@example.com"), { scope: "everyone" }, 400, "validation_failed"],
    ["PUT", path("email", "ok@example.com"), { extra: 1 }, 400, "validation_failed"],
    ["PUT", path("email", "ok@example.com"), [], 400, "validation_failed"],
    ["PUT", path("email", "ok@example.com"), "{", 400, "malformed_json"],
    ["PUT", path("email", "ok@example.com"), { note: "x".repeat(9000) }, 413, "payload_too_large"],
    ["PUT", path("email", "ok@example.com"), { scope: "all_clients" }, 403, "insufficient_scope"],
    ["DELETE", path("email", "not-an-address"), undefined, 400, "validation_failed"],
    ["DELETE", path("fax", "x"), undefined, 404, "not_found"],
    ["DELETE", `${path("email", "ada@example.com")}?scope=all`, undefined, 400, "validation_failed"],
    ["GET", path("email", "nope"), undefined, 400, "validation_failed"],
    ["GET", "/suppressions?limit=0", undefined, 400, "validation_failed"],
    ["GET", "/suppressions?channel=push", undefined, 400, "validation_failed"],
    ["GET", "/suppressions?reason=x", undefined, 400, "validation_failed"],
    ["GET", "/suppressions?cursor=abc", undefined, 400, "invalid_cursor"],
    ["GET", "/suppressions?client=blog", undefined, 403, "insufficient_scope"],
    ["GET", "/suppressions?client=*", undefined, 403, "insufficient_scope"],
  ];
  for (const [method, p, body, status, code] of bad) {
    await expectProblem(t, await call(method, p, shop, body), status, code);
  }
  const textBody = await app.request(`/api/v1${path("email", "ok@example.com")}`, {
    method: "PUT",
    headers: { "x-api-key": shop, "content-type": "text/plain" },
    body: "reason=manual",
  });
  await expectProblem(t, textBody, 415, "unsupported_media_type");
  t.equal(await rows(), before, "nothing written");
});

t.test("any text as an address: a valid one is kept normalised, anything else is a 400 (fast-check)", async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.constantFrom("email", "sms"), fc.string({ maxLength: 40 }), async (channel, raw) => {
      const response = await call("GET", `/suppressions/${channel}/${encodeURIComponent(raw)}`, blog);
      t.ok([200, 400, 404].includes(response.status), `${channel} ${JSON.stringify(raw)}: ${response.status}`);
      const body = (await response.json()) as { code?: string };
      if (response.status === 400) t.equal(body.code, "validation_failed");
      if (response.status === 404) t.equal(body.code, "not_found");
    }),
    { numRuns: 100 },
  );
});

t.test("ownership: a client never sees or removes another client's entries", async (t) => {
  t.equal((await call("PUT", path("email", "mine@example.com"), shop)).status, 201);
  await expectProblem(t, await call("GET", path("email", "mine@example.com"), blog), 404, "not_found");
  await expectProblem(t, await call("DELETE", path("email", "mine@example.com"), blog), 404, "not_found");
  const listed = (await (await call("GET", "/suppressions", blog)).json()) as Page;
  t.notOk(
    listed.data.some((e) => e.client_id === "shop"),
    "absent from the other client's list",
  );
  t.equal((await call("PUT", path("email", "mine@example.com"), blog)).status, 201, "the other client adds its own");
  const seen = (await (await call("GET", path("email", "mine@example.com"), shop)).json()) as { entries: EntryView[] };
  t.same(
    seen.entries.map((e) => e.client_id),
    ["shop"],
    "each sees its own only",
  );
  t.equal((await call("DELETE", path("email", "mine@example.com"), blog)).status, 204);
  t.equal((await call("GET", path("email", "mine@example.com"), shop)).status, 200, "the shop's entry stays");
});

t.test("all_clients entries: read by every client, added and removed by an operator only", async (t) => {
  await addSuppressions(database, [
    {
      channel: "email",
      address: "bounced@example.com",
      client_id: "",
      reason: "hard_bounce",
      source: { provider: "sendgrid", event: "bounce", event_id: "ev1", notification_id: "n-of-another-client" },
    },
  ]);
  const read = await call("GET", path("email", "Bounced@example.com"), blog);
  t.equal(read.status, 200);
  t.same(
    ((await read.json()) as { entries: EntryView[] }).entries[0],
    {
      channel: "email",
      address: "bounced@example.com",
      scope: "all_clients",
      client_id: null,
      reason: "hard_bounce",
      source: { provider: "sendgrid", event: "bounce" },
      created_at: String(
        (
          await database.sql`select created_at from suppressions where address = 'bounced@example.com'`
        )[0]?.created_at.toISOString(),
      ),
    },
    "a client sees the provider and event, not another client's notification",
  );
  const whole = (await (await call("GET", path("email", "bounced@example.com"), operator)).json()) as {
    entries: EntryView[];
  };
  t.match(whole.entries[0]?.source, { event_id: "ev1", notification_id: "n-of-another-client" }, "the operator does");

  await expectProblem(
    t,
    await call("DELETE", `${path("email", "bounced@example.com")}?scope=all_clients`, shop),
    403,
    "insufficient_scope",
  );
  await expectProblem(t, await call("DELETE", path("email", "bounced@example.com"), shop), 404, "not_found");
  await expectProblem(
    t,
    await call("PUT", path("email", "new@example.com"), shopAdmin, { scope: "all_clients" }),
    403,
    "insufficient_scope",
  );
  t.equal((await call("GET", path("email", "bounced@example.com"), shop)).status, 200, "still there");

  const put = await call("PUT", path("sms", "+15550100123"), operator, {
    scope: "all_clients",
    reason: "carrier_opt_out",
  });
  t.equal(put.status, 201);
  t.match(await put.json(), { scope: "all_clients", client_id: null, reason: "carrier_opt_out" });
  t.equal((await call("GET", path("sms", "+15550100123"), blog)).status, 200, "it holds for every client");
  t.equal((await call("DELETE", `${path("sms", "+15550100123")}?scope=all_clients`, operator)).status, 204);
  await expectProblem(
    t,
    await call("DELETE", `${path("sms", "+15550100123")}?scope=all_clients`, operator),
    404,
    "not_found",
  );
  t.equal((await call("DELETE", `${path("email", "bounced@example.com")}?scope=all_clients`, operator)).status, 204);
});

t.test(
  "a removal's note says why: logged with the key that removed the entry; a bad one removes nothing",
  async (t) => {
    const [key] = await database.sql<{ id: string }[]>`select id from api_keys where client_id = 'ops'`;
    t.equal((await call("PUT", path("email", "fixed@example.com"), operator, { scope: "all_clients" })).status, 201);
    const removal = () => `${path("email", "fixed@example.com")}?scope=all_clients`;
    const tooLong = encodeURIComponent("x".repeat(501));
    const refused = await expectProblem(
      t,
      await call("DELETE", `${removal()}&note=${tooLong}`, operator),
      400,
      "validation_failed",
    );
    t.match(refused, { errors: [{ field: "note", message: "note must be at most 500 characters" }] });
    await expectProblem(t, await call("DELETE", `${removal()}&note=a%0Ab`, operator), 400, "validation_failed");
    t.equal((await call("GET", path("email", "fixed@example.com"), shop)).status, 200, "still there");

    const before = lines().length;
    const note = "the user fixed their mailbox <ticket 42>";
    const removed = await call("DELETE", `${removal()}&note=${encodeURIComponent(note)}`, operator);
    t.equal(removed.status, 204);
    t.equal((await call("GET", path("email", "fixed@example.com"), shop)).status, 404, "gone");
    const logged = lines()
      .slice(before)
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((line) => line.msg === "suppression removed");
    t.match(logged, [{ client_id: "ops", channel: "email", scope: "all_clients", note }]);
    t.ok(key, "the operator's key");
    t.equal(logged[0]?.key_id, key?.id, "with the key that removed it");
    t.notOk(JSON.stringify(logged).includes("fixed@example.com"), "the address is not logged");

    t.equal((await call("PUT", path("email", "noted@example.com"), shop)).status, 201);
    const plain = lines().length;
    t.equal((await call("DELETE", path("email", "noted@example.com"), shop)).status, 204, "the note is optional");
    const bare = lines()
      .slice(plain)
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((line) => line.msg === "suppression removed");
    t.ok(bare && !("note" in bare), "no note, none logged");
  },
);

t.test("the contract documents the removal's note", async (t) => {
  const doc = (await (await app.request("/api/v1/openapi.json")).json()) as {
    paths: Record<string, Record<string, { parameters?: Array<{ name: string; in: string; schema?: unknown }> }>>;
  };
  const removal = doc.paths["/api/v1/suppressions/{channel}/{address}"]?.delete;
  t.match(
    removal?.parameters?.find((p) => p.name === "note"),
    { in: "query", schema: { type: "string", maxLength: 500 } },
  );
});

t.test("the list: what holds for the client, filtered, paged newest first", async (t) => {
  await database.sql`delete from suppressions`;
  // Distinct instants, a millisecond apart, oldest first.
  const entries = [
    ["email", "a1@example.com", "shop", "manual"],
    ["email", "a2@example.com", "", "hard_bounce"],
    ["sms", "+15550100001", "shop", "unsubscribe"],
    ["email", "b1@example.org", "blog", "manual"],
    ["email", "a3@example.com", "shop", "spam_complaint"],
    ["sms", "+15550100002", "", "carrier_opt_out"],
    ["email", "a4@example.com", "shop", "manual"],
  ] as const;
  for (const [i, [channel, address, client, reason]] of entries.entries()) {
    await database.sql`insert into suppressions (channel, address, client_id, reason, created_at)
      values (${channel}, ${address}, ${client}, ${reason}, timestamptz '2030-01-01 00:00:00+00' + ${i}::int * interval '1 ms')`;
  }
  const list = async (query: string, key = shop) => {
    const response = await call("GET", `/suppressions${query}`, key);
    t.equal(response.status, 200, query);
    return (await response.json()) as Page;
  };
  const addresses = (page: Page) => page.data.map((e) => e.address);

  t.same(addresses(await list("")), [
    "a4@example.com",
    "+15550100002",
    "a3@example.com",
    "+15550100001",
    "a2@example.com",
    "a1@example.com",
  ]);
  t.same(addresses(await list("?channel=sms")), ["+15550100002", "+15550100001"]);
  t.same(addresses(await list("?reason=manual")), ["a4@example.com", "a1@example.com"]);
  t.same(addresses(await list("?address_prefix=A2%40")), ["a2@example.com"], "a prefix compares as kept");
  t.same(addresses(await list("?address_prefix=%2B1555")), ["+15550100002", "+15550100001"]);
  t.same(addresses(await list("", blog)), ["+15550100002", "b1@example.org", "a2@example.com"]);
  t.same(addresses(await list("?client=blog", operator)), ["+15550100002", "b1@example.org", "a2@example.com"]);
  t.equal((await list("?client=*", operator)).data.length, entries.length, "* lists every entry");
  t.same(addresses(await list("", operator)), ["+15550100002", "a2@example.com"], "the operator key's own client");

  const seen: string[] = [];
  let query = "?limit=2";
  for (let pages = 0; pages < 10; pages++) {
    const page = await list(query);
    t.ok(page.data.length <= 2);
    seen.push(...addresses(page));
    if (page.next_cursor === null) break;
    query = `?limit=2&cursor=${encodeURIComponent(page.next_cursor)}`;
  }
  t.same(seen, addresses(await list("")), "the pages hold every entry once, in order");

  const first = await list("?limit=1");
  const cursor = encodeURIComponent(first.next_cursor as string);
  await expectProblem(t, await call("GET", `/suppressions?limit=1&cursor=${cursor}`, blog), 400, "invalid_cursor");
  await expectProblem(
    t,
    await call("GET", `/suppressions?limit=1&channel=email&cursor=${cursor}`, shop),
    400,
    "invalid_cursor",
  );
  t.equal((await list(`?limit=600&cursor=${cursor}`)).data.length, 5, "a larger limit is taken as the most");
});
