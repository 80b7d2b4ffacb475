import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LaneMessage } from "@notify/core";
import { seedTemplate } from "@notify/db";
import t from "tap";
import { laneDeps } from "../src/consumers.js";
import { sendDigests } from "../src/digests/send.js";
import { routeNotification } from "../src/routing/route.js";
import { channelRows, processorFixture, seedUser, storeNotifications, workItems } from "./helpers.js";

// Digests: items of one client, user, template and key join one open digest (nothing of them is
// routed on its own); when the window (fixed from the first item) ends, or max_items have
// joined, the digest is sent as one notification of its own, routed like any other, its
// template given it.items (in accept order) and it.count.
const { database, bus, clock, deps } = await processorFixture(t);
await seedTemplate(database, {
  id: "comments",
  params: ["who"],
  variants: [
    {
      channel: "email",
      locale: "en",
      subject: "<%= it.count %> new comments",
      body: "<% for (const c of it.items) { %><p><%= c.who %></p><% } %>",
    },
  ],
});
const start = new Date("2026-06-01T12:00:00Z");
const digest = { key: "post-1", window: "30m", max_items: 50 };

async function item(userId: string, who: string, over: Partial<Parameters<typeof storeNotifications>[2][number]> = {}) {
  const [message] = await storeNotifications(database, bus, [
    { user_id: userId, template_id: "comments", priority: "transactional", data: { who }, digest, ...over },
  ]);
  if (!message) throw new Error("not stored");
  return message;
}
const route = async (message: LaneMessage) => routeNotification(await laneDeps(deps, "transactional"), message);
const digestsOf = (userId: string) =>
  database.sql<{ id: string; status: string; item_count: number; notification_id: string | null; closes_at: Date }[]>`
    select id, status, item_count, notification_id, closes_at from digests where user_id = ${userId} order by opened_at, id`;
const sentData = async (notificationId: string | null) =>
  (await database.sql<{ data: unknown }[]>`select data from notifications where id = ${notificationId}`)[0]?.data;
const lane = await laneDeps(deps, "transactional");
async function lastLaneMessage(): Promise<LaneMessage> {
  const stream = bus.streams.lane("transactional");
  const info = await bus.jsm.streams.info(stream);
  const last = await bus.jsm.streams.getMessage(stream, { seq: info.state.last_seq });
  if (!last) throw new Error("no lane message");
  return last.json<LaneMessage>();
}

t.test("items collect into one digest, sent once when its window ends, in accept order", async (t) => {
  await seedUser(database, "dg-1");
  clock.now = start;
  const items = [await item("dg-1", "Ann"), await item("dg-1", "Bob"), await item("dg-1", "Cy")];
  // Routed out of order: the digest still lists them in the order they were accepted.
  for (const m of [items[1], items[0], items[2]]) t.equal(await route(m as LaneMessage), "routed");
  t.equal(await route(items[0] as LaneMessage), "duplicate", "a redelivered item joins nothing twice");
  for (const m of items) t.same(await channelRows(database, m.notification_id), {}, "no outcome of its own");
  const [open] = await digestsOf("dg-1");
  t.match(open, { status: "open", item_count: 3, notification_id: null });
  t.equal(open?.closes_at.toISOString(), "2026-06-01T12:30:00.000Z", "the window runs from the first item");

  clock.now = new Date("2026-06-01T12:29:59Z");
  t.equal(await sendDigests(lane), 0, "not before the window ends");
  clock.now = new Date("2026-06-01T12:30:00Z");
  t.equal(await sendDigests(lane), 1);
  t.equal(await sendDigests(lane), 0, "sent once");
  const [sent] = await digestsOf("dg-1");
  t.equal(sent?.status, "sent");
  t.same(await sentData(sent?.notification_id ?? null), {
    items: [{ who: "Ann" }, { who: "Bob" }, { who: "Cy" }],
    count: 3,
    omitted: 0,
  });

  // Its lane message is out; routed, it renders the items.
  const message = await lastLaneMessage();
  t.equal(message.notification_id, sent?.notification_id);
  t.equal(await route(message), "routed");
  t.match((await channelRows(database, message.notification_id)).email, { status: "pending" });
  const work = (await workItems(bus)).filter((w) => w.item.notification_id === sent?.notification_id);
  t.match(work[0]?.item, { subject: "3 new comments", body: "<p>Ann</p><p>Bob</p><p>Cy</p>" });
});

t.test("an item after the digest was sent opens the next one; other keys and users are apart", async (t) => {
  await seedUser(database, "dg-2");
  await seedUser(database, "dg-3");
  clock.now = start;
  await route(await item("dg-2", "A"));
  await route(await item("dg-2", "B", { digest: { ...digest, key: "post-2" } }));
  await route(await item("dg-3", "C"));
  t.equal((await digestsOf("dg-2")).length, 2);
  clock.now = new Date("2026-06-01T12:31:00Z");
  t.equal(await sendDigests(lane), 3);
  await route(await item("dg-2", "D"));
  const after = await digestsOf("dg-2");
  t.same(
    after.map((d) => [d.status, d.item_count]),
    [
      ["sent", 1],
      ["sent", 1],
      ["open", 1],
    ],
  );
  t.equal(after[2]?.closes_at.toISOString(), "2026-06-01T13:01:00.000Z");
});

t.test("max_items closes a digest at once; the next item opens a new one", async (t) => {
  await seedUser(database, "dg-max");
  clock.now = start;
  const small = { ...digest, max_items: 2 };
  for (const who of ["a", "b", "c"]) await route(await item("dg-max", who, { digest: small }));
  const rows = await digestsOf("dg-max");
  t.same(
    rows.map((d) => [d.status, d.item_count]),
    [
      ["closed", 2],
      ["open", 1],
    ],
  );
  t.equal(await sendDigests(lane), 1, "the full one goes at once, the open one waits");
  t.equal((await digestsOf("dg-max"))[0]?.status, "sent");
});

t.test("concurrent items for one key from several processors: each joins exactly one digest", async (t) => {
  await seedUser(database, "dg-race");
  clock.now = start;
  const small = { ...digest, max_items: 7 };
  const items = [];
  for (let i = 0; i < 40; i++) items.push(await item("dg-race", `u${i}`, { digest: small }));
  const lanes = await Promise.all([1, 2, 3, 4].map(() => laneDeps(deps, "transactional")));
  // Every item routed twice, by different processors, all at once.
  await Promise.all(
    [...items, ...items].map((m, i) => routeNotification(lanes[i % lanes.length] as (typeof lanes)[0], m)),
  );
  const rows = await digestsOf("dg-race");
  t.equal(
    rows.reduce((n, d) => n + d.item_count, 0),
    40,
    "every item counted once",
  );
  t.ok(rows.every((d) => d.item_count >= 1 && d.item_count <= 7));
  t.equal(rows.filter((d) => d.status === "open").length, 1, "one open digest per key");
  const [joined] = await database.sql<{ n: number; digests: number }[]>`
    select count(*)::int as n, count(distinct digest_id)::int as digests from digest_items i
    join notifications n on n.id = i.notification_id where n.user_id = 'dg-race'`;
  t.same(joined, { n: 40, digests: rows.length });
  clock.now = new Date("2026-06-01T13:00:00Z");
  await Promise.all(lanes.map((l) => sendDigests(l, 2)));
  const sent = await digestsOf("dg-race");
  t.ok(
    sent.every((d) => d.status === "sent" && d.notification_id !== null),
    "each sent once, by one of them",
  );
  t.equal(new Set(sent.map((d) => d.notification_id)).size, sent.length);
});

t.test("preferences apply to the digest as a whole when it is sent", async (t) => {
  await seedUser(database, "dg-opt");
  clock.now = start;
  await route(await item("dg-opt", "x"));
  await seedUser(database, "dg-opt", { channel_optout: ["email"] });
  clock.now = new Date("2026-06-01T12:31:00Z");
  await sendDigests(lane);
  const [sent] = await digestsOf("dg-opt");
  const message = await lastLaneMessage();
  t.equal(message.notification_id, sent?.notification_id);
  await route(message);
  t.match((await channelRows(database, message.notification_id)).email, { status: "suppressed", reason: "opted_out" });
});

t.test("a canceled item is left out of its digest; one whose digest was sent is too late", async (t) => {
  const { cancelDigestItem } = await import("@notify/db");
  await seedUser(database, "dg-cancel");
  clock.now = start;
  const [a, b] = [await item("dg-cancel", "keep"), await item("dg-cancel", "drop")];
  await route(a as LaneMessage);
  await route(b as LaneMessage);
  const cancel = (id: string, clientId = "shop") => cancelDigestItem(database, { id, clientId, at: clock.now });
  t.equal(await cancel(b?.notification_id as string, "other"), null, "another client's item is not found");
  t.equal(await cancel(b?.notification_id as string), "canceled");
  t.equal(await cancel(b?.notification_id as string), "already_canceled");
  t.equal((await digestsOf("dg-cancel"))[0]?.item_count, 1);
  clock.now = new Date("2026-06-01T12:31:00Z");
  await sendDigests(lane);
  const [sent] = await digestsOf("dg-cancel");
  t.same(await sentData(sent?.notification_id ?? null), { items: [{ who: "keep" }], count: 1, omitted: 0 });
  t.equal(await cancel(a?.notification_id as string), "too_late");
  t.equal(await route(b as LaneMessage), "duplicate", "a canceled item is never routed on its own");
});

t.test("retention keeps an item whose digest is not sent, and forgets digests sent long ago", async (t) => {
  const { purgeSentDigests } = await import("@notify/db");
  const { folderStore, retirePartitions } = await import("@notify/ops");
  await seedUser(database, "dg-old");
  clock.now = start;
  const [waiting, archived] = [
    await item("dg-old", "w"),
    await item("dg-old", "a", { digest: { ...digest, key: "k2" } }),
  ];
  await route(waiting as LaneMessage);
  await route(archived as LaneMessage);
  await database.sql`update digests set status = 'sent', sent_at = now() - interval '40 days'
    where user_id = 'dg-old' and key = 'k2'`;
  // Forty days on, the range that holds them is past a 30-day window and is retired.
  const store = folderStore(mkdtempSync(join(tmpdir(), "notify-digests-archive-")));
  await retirePartitions(database, { store, days: 30, asOf: new Date(Date.now() + 40 * 86_400_000) });
  const live = await database.sql<{ id: string }[]>`
    select id from notifications where id = any(${[waiting?.notification_id, archived?.notification_id] as string[]})`;
  t.same(
    live.map((r) => r.id),
    [waiting?.notification_id],
    "an item of an open digest stays; an item of a sent digest is archived",
  );
  // The earlier tests' digests were sent on the test clock's June day, long ago too.
  t.ok((await purgeSentDigests(database, 30)) >= 1);
  t.same(
    (await digestsOf("dg-old")).map((d) => d.status),
    ["open"],
  );
});
