import { randomUUID } from "node:crypto";
import { newId } from "@notify/core";
import { seedApiKey } from "@notify/db";
import fc from "fast-check";
import t from "tap";
import type { NotificationStatusView } from "../src/notifications/get.js";
import type { NotificationPage } from "../src/notifications/list.js";
import { ingestApp } from "./support.js";

/** A page, or a problem when the status says so. */
type Answer = NotificationPage & { code?: string; detail?: string; errors?: Array<{ field: string }> };

const { app, database } = await ingestApp(t);
const reader = await seedApiKey(database, { clientId: "shop", name: "reader", scopes: ["read"] });
const otherClient = await seedApiKey(database, { clientId: "bank", name: "bank reader", scopes: ["read"] });
const prefsOnly = await seedApiKey(database, { clientId: "shop", name: "prefs", scopes: ["preferences"] });

interface Row {
  id?: string;
  userId: string;
  clientId?: string;
  category?: string;
  createdAt?: Date | string;
}

/**
 * Notifications written straight into the log, as ingest would have stored them. Times go as
 * text: postgres.js would pass a timestamptz parameter through Date and drop the microseconds.
 */
async function insert(rows: Row[]): Promise<string[]> {
  const ids = rows.map((row) => row.id ?? newId());
  await database.sql`insert into notifications
      (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition, created_at)
    select id, client_id, user_id, category, 'welcome', 'promotional', '{}'::jsonb, id, 'h', 0, coalesce(created_at, now())
    from unnest(${ids}::text[], ${rows.map((r) => r.clientId ?? "shop")}::text[], ${rows.map((r) => r.userId)}::text[],
      ${rows.map((r) => r.category ?? "news")}::text[],
      ${rows.map((r) => (r.createdAt instanceof Date ? r.createdAt.toISOString() : (r.createdAt ?? null)))}::text[]::timestamptz[])
      as t(id, client_id, user_id, category, created_at)`;
  return ids;
}

const list = async (userId: string, query: Record<string, string> = {}, key = reader) => {
  const response = await app.request(
    `/api/v1/users/${encodeURIComponent(userId)}/notifications?${new URLSearchParams(query)}`,
    {
      headers: { "x-api-key": key },
    },
  );
  return { status: response.status, body: (await response.json()) as Answer };
};

/** Every page from the first, following next_cursor. */
async function all(
  userId: string,
  query: Record<string, string> = {},
  between: () => Promise<unknown> = async () => {},
) {
  const seen: NotificationStatusView[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await list(userId, { ...query, ...(cursor ? { cursor } : {}) });
    if (page.status !== 200) throw new Error(JSON.stringify(page.body));
    seen.push(...page.body.data);
    if (!page.body.has_more) {
      if (page.body.next_cursor !== null) throw new Error("the last page has a cursor");
      return seen;
    }
    cursor = page.body.next_cursor ?? undefined;
    await between();
  }
}

t.test("newest first, paged by cursor, with per-channel results and the documented limits", async (t) => {
  // Several rows share one instant (a group commit), and two differ by a microsecond.
  const ids = await insert([
    { userId: "u-order", createdAt: "2026-01-01T00:00:00.000001Z" },
    { userId: "u-order", createdAt: "2026-01-01T00:00:00.000002Z" },
    ...Array.from({ length: 5 }, () => ({ userId: "u-order", createdAt: "2026-01-02T00:00:00Z" })),
    { userId: "u-order", createdAt: "2026-01-03T00:00:00Z" },
  ]);
  await database.sql`insert into notification_channels (notification_id, channel, status, reason)
    values (${ids[7] as string}, 'email', 'delivered', null), (${ids[7] as string}, 'sms', 'suppressed', 'opted_out')`;
  const seen = await all("u-order", { limit: "3" });
  const tied = ids.slice(2, 7).sort();
  t.same(
    seen.map((n) => n.notification_id),
    [ids[7], ...tied, ids[1], ids[0]],
  );
  t.equal(seen[0]?.channels.email?.status, "delivered");
  t.equal(seen[0]?.channels.sms?.reason, "opted_out");
  t.equal(seen[0]?.created_at, "2026-01-03T00:00:00.000Z");

  const first = await list("u-order");
  t.equal(first.body.data.length, 8);
  t.equal(first.body.has_more, false);
  t.equal(first.body.next_cursor, null);
  t.equal((await list("u-order", { limit: "100000" })).status, 200, "a large limit is clamped");
  for (const limit of ["0", "-1", "x", "1.5"]) {
    const bad = await list("u-order", { limit });
    t.equal(bad.status, 400, `limit=${limit}`);
    t.equal(bad.body.code, "validation_failed");
  }
  t.equal((await list("u-order", { unknown: "1" })).status, 400);
});

t.test("each item's status is derived from its channels, as in GET /notifications/{id}", async (t) => {
  const channels: Array<[string, Array<[string, string]>]> = [
    ["accepted", []],
    [
      "processing",
      [
        ["email", "delivered"],
        ["sms", "retrying"],
      ],
    ],
    [
      "unsettled",
      [
        ["email", "unsettled"],
        ["sms", "failed"],
      ],
    ],
    [
      "completed",
      [
        ["email", "delivered"],
        ["sms", "suppressed"],
      ],
    ],
    [
      "partially_failed",
      [
        ["email", "bounced"],
        ["push", "delivered"],
      ],
    ],
    [
      "failed",
      [
        ["email", "failed"],
        ["sms", "suppressed"],
      ],
    ],
    ["suppressed", [["email", "suppressed"]]],
  ];
  const ids = await insert(channels.map(() => ({ userId: "u-status" })));
  const rows = channels.flatMap(([, list], i) => list.map(([channel, status]) => ({ id: ids[i], channel, status })));
  await database.sql`insert into notification_channels (notification_id, channel, status)
    select * from unnest(${rows.map((r) => r.id as string)}::text[], ${rows.map((r) => r.channel)}::text[],
      ${rows.map((r) => r.status)}::text[])`;
  const byId = new Map((await all("u-status")).map((n) => [n.notification_id, n]));
  for (const [i, [expected, list]] of channels.entries()) {
    const view = byId.get(ids[i] as string);
    t.equal(view?.status, expected, list.map(([c, s]) => `${c} ${s}`).join(", ") || "no channels");
    const one = await app.request(`/api/v1/notifications/${ids[i]}`, { headers: { "x-api-key": reader } });
    t.equal(((await one.json()) as NotificationStatusView).status, expected, "the same in GET /notifications/{id}");
  }
});

t.test("filters by category, channel status and time range", async (t) => {
  const [a, b, c] = await insert([
    { userId: "u-filter", category: "orders", createdAt: "2026-02-01T00:00:00Z" },
    { userId: "u-filter", category: "news", createdAt: "2026-02-02T00:00:00Z" },
    { userId: "u-filter", category: "orders", createdAt: "2026-02-03T00:00:00Z" },
  ]);
  await database.sql`insert into notification_channels (notification_id, channel, status)
    values (${a as string}, 'email', 'failed'), (${c as string}, 'email', 'delivered')`;
  const ids = async (query: Record<string, string>) => (await all("u-filter", query)).map((n) => n.notification_id);
  t.same(await ids({ category: "orders" }), [c, a]);
  t.same(await ids({ status: "failed" }), [a]);
  t.same(await ids({ since: "2026-02-02T00:00:00Z" }), [c, b]);
  t.same(await ids({ until: "2026-02-02T00:00:00Z" }), [a]);
  t.same(await ids({ since: "2026-02-01T12:00:00Z", until: "2026-02-03T00:00:00Z", limit: "1" }), [b]);
  for (const query of [
    { status: "lost" } as Record<string, string>,
    { since: "yesterday" },
    { since: "2026-02-03T00:00:00Z", until: "2026-02-01T00:00:00Z" },
    { category: "Bad Category" },
  ]) {
    t.equal((await list("u-filter", query)).status, 400, JSON.stringify(query));
  }
});

t.test("a cursor is refused with other filters, changed, from another client or version", async (t) => {
  await insert(Array.from({ length: 4 }, () => ({ userId: "u-cursor", category: "orders" })));
  await insert([{ userId: "u-cursor", clientId: "bank", category: "orders" }]);
  const page = await list("u-cursor", { limit: "2", category: "orders" });
  const cursor = page.body.next_cursor as string;
  t.ok(cursor);
  t.match(cursor, /^[A-Za-z0-9_-]+$/, "URL-safe");
  t.equal((await list("u-cursor", { limit: "1", category: "orders", cursor })).status, 200, "the limit may change");

  const refused = async (query: Record<string, string>, key = reader) => {
    const answer = await list("u-cursor", query, key);
    t.equal(answer.status, 400, JSON.stringify(query));
    t.equal(answer.body.code, "invalid_cursor");
    t.equal(answer.body.errors?.[0]?.field, "cursor");
    return answer.body.detail as string;
  };
  await refused({ cursor });
  await refused({ category: "news", cursor });
  await refused({ category: "orders", status: "pending", cursor });
  await refused({ category: "orders", cursor }, otherClient);
  t.equal((await list("u-other", { category: "orders", cursor })).status, 400, "another user");
  const flipped = `${cursor.slice(0, 10)}${cursor[10] === "A" ? "B" : "A"}${cursor.slice(11)}`;
  await refused({ category: "orders", cursor: flipped });
  const old = Buffer.from(cursor, "base64url");
  old[0] = 0;
  t.match(await refused({ category: "orders", cursor: old.toString("base64url") }), /another version/);
  await refused({ category: "orders", cursor: Buffer.from('{"id":1}').toString("base64url") });
});

t.test("scope read; a client sees only its own notifications", async (t) => {
  await insert([{ userId: "u-scope" }, { userId: "u-scope", clientId: "bank" }]);
  t.equal((await list("u-scope")).body.data.length, 1);
  t.equal((await list("u-scope", {}, otherClient)).body.data.length, 1);
  t.not(
    (await list("u-scope")).body.data[0]?.notification_id,
    (await list("u-scope", {}, otherClient)).body.data[0]?.notification_id,
  );
  t.equal((await list("u-scope", {}, prefsOnly)).status, 403);
  const anonymous = await app.request("/api/v1/users/u-scope/notifications");
  t.equal(anonymous.status, 401);
});

t.test("property: paging never loses or repeats an item while notifications arrive", async (t) => {
  const base = Date.parse("2026-03-01T00:00:00Z");
  // Instants on a coarse grid, so many rows tie on created_at and the id must break the tie.
  const instant = fc.integer({ min: 0, max: 40 }).map((n) => new Date(base + n * 1000));
  await fc.assert(
    fc.asyncProperty(
      fc.array(instant, { minLength: 0, maxLength: 30 }),
      fc.integer({ min: 1, max: 7 }),
      fc.array(fc.array(fc.option(instant, { nil: undefined }), { maxLength: 4 }), { maxLength: 10 }),
      async (initial, limit, arrivals) => {
        const userId = `u-prop-${randomUUID()}`;
        const before = await insert(initial.map((createdAt) => ({ userId, createdAt })));
        const arrived: string[] = [];
        let step = 0;
        const seen = await all(userId, { limit: String(limit) }, async () => {
          const batch = arrivals[step++] ?? [];
          // New rows: now() (newer than everything) or at any earlier instant, ties included.
          arrived.push(...(await insert(batch.map((createdAt) => ({ userId, ...(createdAt ? { createdAt } : {}) })))));
        });
        const ids = seen.map((n) => n.notification_id as string);
        t.equal(new Set(ids).size, ids.length, "no repeats");
        for (const id of before) t.ok(ids.includes(id), "no item present at the start is lost");
        const known = new Set([...before, ...arrived]);
        for (const id of ids) t.ok(known.has(id));
        for (let i = 1; i < seen.length; i++) {
          t.ok((seen[i - 1]?.created_at ?? "") >= (seen[i]?.created_at ?? ""), "newest first");
        }
      },
    ),
    { numRuns: 25 },
  );
});
