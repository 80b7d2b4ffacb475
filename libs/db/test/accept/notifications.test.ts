import { countingDatabase, freshDatabase } from "@notify/testing";
import fc from "fast-check";
import t from "tap";
import {
  type AcceptedRow,
  acceptNotifications,
  createDb,
  deleteSettledOutboxRows,
  findIdempotencyRecords,
  narrowOutboxRow,
  purgeExpiredIdempotencyKeys,
  readNotification,
  removeUnpublished,
  sweepPublishOutbox,
} from "../../src/index.js";
import { acceptedRow } from "../support.js";

// The group commit's statement and the outbox around it, against a real Postgres: the key is
// claimed once per window, a compensating delete never races the recovery sweep, and the sweep
// keeps exactly the notifications still to publish.
const { database, url } = await freshDatabase(t);
const { sql } = database;

const row = acceptedRow;

const outboxIds = async (id: string) =>
  (await sql<{ notification_ids: string[] }[]>`select notification_ids from publish_outbox where id = ${id}::bigint`)[0]
    ?.notification_ids ?? null;

t.test("a key is claimed once per window; a key past the window is taken over", async (t) => {
  const first = row("c1", "k-once");
  const accepted = await acceptNotifications(database, [first, row("c1", "k-other")], 24);
  t.equal(accepted.inserted.size, 2);
  t.ok(accepted.createdAt instanceof Date, "stored at the statement's time");
  t.ok(accepted.outboxId);
  t.same(new Set(await outboxIds(accepted.outboxId as string)), accepted.inserted);

  const again = await acceptNotifications(database, [row("c1", "k-once", { request_hash: "other" })], 24);
  t.equal(again.inserted.size, 0, "the key is held: nothing inserted");
  t.equal(again.createdAt, null);
  t.equal(again.outboxId, null, "and no outbox row for an empty batch");
  const [record] = await findIdempotencyRecords(database, [{ clientId: "c1", key: "k-once" }]);
  t.equal(record?.notification_id, first.id);
  t.equal(record?.request_hash, "hash-k-once", "the first request's hash is kept");
  t.equal(record?.unpublished, true, "listed in the outbox: in flight");
  t.same(await findIdempotencyRecords(database, [{ clientId: "c2", key: "k-once" }]), [], "keys are per client");

  await sql`update idempotency_keys set created_at = now() - interval '25 hours' where key = 'k-once'`;
  const later = row("c1", "k-once");
  const takenOver = await acceptNotifications(database, [later], 24);
  t.ok(takenOver.inserted.has(later.id), "past the window the key is claimed afresh");
  const [renewed] = await findIdempotencyRecords(database, [{ clientId: "c1", key: "k-once" }]);
  t.equal(renewed?.notification_id, later.id);
});

// What readJson lets through: no string (value or key) with U+0000 or an unpaired surrogate.
const storable = (text: string) =>
  !text.includes("\u0000") && !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text);
const storableValue = (value: unknown): boolean =>
  typeof value === "string"
    ? storable(value)
    : Array.isArray(value)
      ? value.every(storableValue)
      : value === null || typeof value !== "object"
        ? true
        : Object.entries(value).every(([key, item]) => storable(key) && storableValue(item));
const storableData = fc
  .dictionary(fc.string({ unit: "binary" }), fc.jsonValue({ stringUnit: "binary" }))
  .filter(storableValue)
  // What the request carried after JSON.parse: -0 is written 0, as the body would have had it.
  .map((data) => JSON.parse(JSON.stringify(data)) as Record<string, unknown>);

t.test("every field of a batch is stored as it was sent", async (t) => {
  let n = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.record({
          data: storableData,
          channels: fc.option(fc.uniqueArray(fc.constantFrom("email", "sms", "push", "in_app"), { minLength: 1 })),
          template_version: fc.option(fc.integer({ min: 1, max: 2 ** 31 - 1 })),
          deliver_by: fc.option(
            fc.date({
              min: new Date("2000-01-01T00:00:00Z"),
              max: new Date("2100-01-01T00:00:00Z"),
              noInvalidDate: true,
            }),
          ),
          user_id: fc.string({ unit: "binary", minLength: 1 }).filter(storable),
          trace_parent: fc.option(fc.string({ unit: "binary" }).filter(storable), { nil: undefined }),
        }),
        { minLength: 1, maxLength: 5 },
      ),
      async (shapes) => {
        const rows = shapes.map(({ trace_parent, ...shape }) =>
          row("c-shapes", `shape-${n++}`, {
            ...shape,
            channels: shape.channels as AcceptedRow["channels"],
            deliver_by: shape.deliver_by?.toISOString() ?? null,
            ...(trace_parent === undefined ? {} : { trace_parent }),
          }),
        );
        const { inserted, createdAt } = await acceptNotifications(database, rows, 24);
        const stored = await sql<
          {
            id: string;
            data: unknown;
            created_at: Date;
            requested_channels: string[] | null;
            template_version: number | null;
            deliver_by: Date | null;
            user_id: string;
            trace_parent: string | null;
          }[]
        >`select id, data, created_at, requested_channels, template_version, deliver_by, user_id, trace_parent
          from notifications
          where id = any(${rows.map((r) => r.id)}::text[])`;
        const byId = new Map(stored.map((s) => [s.id, s]));
        for (const sent of rows) {
          const got = byId.get(sent.id);
          if (!inserted.has(sent.id) || got === undefined) return false;
          if (got.created_at.getTime() !== createdAt?.getTime()) return false;
          if (JSON.stringify(sortKeys(got.data)) !== JSON.stringify(sortKeys(sent.data))) return false;
          if (JSON.stringify(got.requested_channels) !== JSON.stringify(sent.channels)) return false;
          if (got.template_version !== sent.template_version || got.user_id !== sent.user_id) return false;
          if ((got.deliver_by?.toISOString() ?? null) !== sent.deliver_by) return false;
          if (got.trace_parent !== (sent.trace_parent ?? null)) return false;
        }
        return true;
      },
    ),
    { numRuns: 100 },
  );
  t.pass("100 batches stored field for field");
});

t.test("a nullable field left undefined by a JavaScript caller is stored as null", async (t) => {
  const { deliver_by: _d, fallback: _f, template_version: _v, channels: _c, ...rest } = row("c-js", "js-1");
  const { inserted } = await acceptNotifications(database, [rest as unknown as AcceptedRow], 24);
  t.ok(inserted.has(rest.id));
  const [stored] = await sql<
    { deliver_by: Date | null; template_version: number | null; requested_channels: string[] | null }[]
  >`select deliver_by, template_version, requested_channels from notifications where id = ${rest.id}`;
  t.same(stored, { deliver_by: null, template_version: null, requested_channels: null });
  const fallbacks = await sql`select 1 from notification_fallbacks where notification_id = ${rest.id}`;
  t.equal(fallbacks.length, 0, "no fallback chain");
});

/** jsonb keeps an object's keys in its own order: compared with keys sorted. */
function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, sortKeys((value as Record<string, unknown>)[key])]),
  );
}

t.test("the purge deletes only the default partition's records past the window, a slice at a time", async (t) => {
  // Today's claims are in today's partition, which is dropped whole: past the window or not, the
  // purge leaves them. Rows of a day without a partition (the job that makes them was late) are in
  // the default partition, and those past the window go there, a slice at a time.
  await acceptNotifications(database, [row("c-purge", "today")], 24);
  await sql`update idempotency_keys set created_at = now() - interval '30 hours' where key = 'today'`;
  await sql`
    insert into idempotency_keys (client_id, key, slot, request_hash, notification_id, created_at)
    values ('c-purge', 'p1', '2001-01-01', 'h', 'n1', now() - interval '30 hours'),
           ('c-purge', 'p2', '2001-01-01', 'h', 'n2', now() - interval '30 hours'),
           ('c-purge', 'p3', '2001-01-01', 'h', 'n3', now())`;
  const inDefault = async () =>
    (
      await sql<{ key: string }[]>`
        select key from idempotency_keys where tableoid = 'idempotency_keys_default'::regclass and client_id = 'c-purge'
        order by key`
    ).map((r) => r.key);
  t.same(await inDefault(), ["p1", "p2", "p3"], "rows of a day without a partition are in the default partition");
  t.equal(await purgeExpiredIdempotencyKeys(database, 24, 1), 1, "at most the limit");
  t.equal(await purgeExpiredIdempotencyKeys(database, 24), 1);
  t.equal(await purgeExpiredIdempotencyKeys(database, 24), 0);
  t.same(await inDefault(), ["p3"], "the record in the window stays");
  const [kept] = await sql<{ count: number }[]>`
    select count(*)::int as count from idempotency_keys where client_id = 'c-purge' and key = 'today'`;
  t.equal(kept?.count, 2, "the daily partitions' rows are not deleted (both days of the claim)");
});

t.test("a failed publish is undone only while the batch's outbox row is not the sweep's", async (t) => {
  const a = row("c3", "a");
  const b = row("c3", "b");
  const { outboxId } = await acceptNotifications(database, [a, b], 24);
  const id = outboxId as string;

  // The sweep holds the row (FOR UPDATE in its transaction): nothing is removed.
  let release: () => void = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  let locked: () => void = () => {};
  const isLocked = new Promise<void>((resolve) => {
    locked = resolve;
  });
  const holder = sql.begin(async (tx) => {
    await tx`select id from publish_outbox where id = ${id}::bigint for update`;
    locked();
    await held;
  });
  await isLocked;
  t.equal(await removeUnpublished(database, id, [a.id]), 0, "held by the sweep: kept");
  release();
  await holder;
  t.ok(await readNotification(database, "c3", a.id), "the row is still there");

  t.equal(await removeUnpublished(database, id, [a.id]), 1, "not held: removed");
  t.equal(await readNotification(database, "c3", a.id), null);
  t.same(await findIdempotencyRecords(database, [{ clientId: "c3", key: "a" }]), [], "its key is released for a retry");
  t.equal((await findIdempotencyRecords(database, [{ clientId: "c3", key: "b" }])).length, 1, "the other is kept");

  await narrowOutboxRow(database, id, [b.id]);
  t.same(await outboxIds(id), [b.id]);
  await sql`delete from publish_outbox where id = ${id}::bigint`;
  t.equal(await removeUnpublished(database, id, [b.id]), 0, "a settled batch is never undone");
  t.ok(await readNotification(database, "c3", b.id));
});

t.test("the sweep publishes old batches within its budget and keeps what failed", async (t) => {
  await sql`delete from publish_outbox`;
  const rows = [row("c4", "s1"), row("c4", "s2"), row("c4", "s3", { template_version: null, channels: ["email"] })];
  const { outboxId } = await acceptNotifications(database, rows, 24);
  const id = outboxId as string;

  let seen: string[] = [];
  const publishNothing = async (ns: Array<{ message: { notification_id: string } }>) => {
    seen = ns.map((n) => n.message.notification_id);
    return new Set<string>();
  };
  t.equal(await sweepPublishOutbox(database, { graceMs: 60_000, maxIds: 10 }, publishNothing), 0, "too young");
  t.same(seen, []);
  await sql`update publish_outbox set created_at = now() - interval '1 minute' where id = ${id}::bigint`;

  // Budget 2 of 3, and the first publish fails: the row keeps the failed one and the untaken one.
  const [s1, , s3] = rows as [AcceptedRow, AcceptedRow, AcceptedRow];
  const published = await sweepPublishOutbox(database, { graceMs: 1000, maxIds: 2 }, async (ns) => {
    t.equal(ns.length, 2);
    const first = ns[0]?.message;
    t.equal(first?.client_id, "c4");
    t.same(first?.data, { name: "Ada" });
    t.match(first?.created_at, /Z$/);
    return new Set([s1.id]);
  });
  t.equal(published, 1);
  t.same(new Set(await outboxIds(id)), new Set([s1.id, s3.id]), "published ones leave the row");

  const messages: Array<{ template_version?: number; channels: string[] | null }> = [];
  t.equal(
    await sweepPublishOutbox(database, { graceMs: 1000, maxIds: 10 }, async (ns) => {
      for (const n of ns) messages.push(n.message);
      return new Set();
    }),
    2,
  );
  t.equal(await outboxIds(id), null, "all published: the row is gone");
  const last = messages.find((m) => m.channels !== null);
  t.same(last?.channels, ["email"]);
  t.notOk(last && "template_version" in last, "no template_version when none was recorded");
});

t.test("settled outbox rows go in one statement, and their connection keeps synchronous commits", async (t) => {
  // One connection: what runs after the delete runs where it ran.
  const one = createDb({ url, max: 1 });
  t.teardown(() => one.close());
  const a = await acceptNotifications(one, [row("c-settle", "k-settle-a")], 24);
  const b = await acceptNotifications(one, [row("c-settle", "k-settle-b")], 24);
  const kept = await acceptNotifications(one, [row("c-settle", "k-settle-c")], 24);
  await deleteSettledOutboxRows(one, [a.outboxId as string]);
  const [setting] = await one.sql<{ synchronous_commit: string }[]>`show synchronous_commit`;
  t.equal(setting?.synchronous_commit, "on", "the pooled connection's commits still wait for the flush");
  const counting = await countingDatabase(t, url);
  await deleteSettledOutboxRows(counting, [b.outboxId as string]);
  t.equal(counting.statements(), 1, "one statement, no transaction block");
  t.same(await outboxIds(a.outboxId as string), null, "the first row is gone");
  t.same(await outboxIds(b.outboxId as string), null, "the second too");
  t.ok(await outboxIds(kept.outboxId as string), "another batch's row stays");
});
