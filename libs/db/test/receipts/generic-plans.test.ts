import { randomUUID } from "node:crypto";
import { freshDatabase } from "@notify/testing";
import postgres from "postgres";
import t from "tap";
import { applyPendingReceipts, type Receipt, recordReceipts } from "../../src/index.js";

// A prepared statement's plan is made once per connection and kept: on a fresh database (no
// statistics, autovacuum not yet round) the plans the receipts' statements get while the tables
// are nearly empty are the plans they keep as the tables fill. Whatever plan PostgreSQL picks,
// a receipt must cost a few index entries, never a read of every send of its provider.

const { url, database } = await freshDatabase(t);
const { sql } = database;
// Generic plans from the first execution, as a pooled connection has them after five.
const generic = postgres(url, {
  max: 1,
  onnotice: () => {},
  connection: { plan_cache_mode: "force_generic_plan" },
});
t.teardown(() => generic.end());
const db = generic as unknown as typeof sql;

const addSends = async (ids: string[], status = "pending") => {
  await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    select id, 'c', 'u', 'promo', 'welcome', 'promotional', '{}', id, 'h', 0 from unnest(${ids}::text[]) id`;
  await sql`insert into notification_channels (notification_id, channel, status, provider, provider_id)
    select id, 'email', ${status}, 'sendgrid', 'm-' || id from unnest(${ids}::text[]) id`;
};
const delivered = (id: string, n = 1, payload: unknown = {}): Receipt => ({
  provider: "sendgrid",
  eventId: `e${n}-${id}`,
  providerId: `m-${id}`,
  status: "delivered",
  reason: null,
  payload,
});
const bounced = (id: string): Receipt => ({ ...delivered(id, 2), status: "bounced", reason: "bounce" });

/** Rows of notification_channels and provider_receipts read by `run`, in one transaction. */
async function rowsRead(run: (tx: typeof sql) => Promise<unknown>): Promise<number> {
  return generic.begin(async (tx) => {
    const read = async () => {
      const [r] = await tx<{ n: number }[]>`
        select sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::int as n
        from pg_stat_xact_user_tables where relname ~ '^(notification_channels(_p[0-9_]+|_default)?|provider_receipts)$'`;
      return r?.n ?? 0;
    };
    const before = await read();
    await run(tx as unknown as typeof sql);
    return (await read()) - before;
  }) as Promise<number>;
}

/** The same for `run` that makes transactions of its own: the table statistics, flushed. */
async function rowsReadAcross(run: () => Promise<unknown>): Promise<number> {
  const read = async () => {
    await generic`select pg_stat_force_next_flush()`;
    await generic`select pg_stat_clear_snapshot()`;
    const [r] = await generic<{ n: number }[]>`
      select sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::int as n
      from pg_stat_user_tables where relname ~ '^(notification_channels(_p[0-9_]+|_default)?|provider_receipts)$'`;
    return r?.n ?? 0;
  };
  const before = await read();
  await run();
  return (await read()) - before;
}

t.test("receipts read a few rows each, whatever the table held when their plans were made", async (t) => {
  // The plans, made while the tables hold one send.
  const first = randomUUID();
  await addSends([first]);
  await recordReceipts(db, [delivered(first), bounced(first)]);
  const unbound = randomUUID();
  await addSends([unbound]);
  await sql`update notification_channels set provider = null, provider_id = null where notification_id = ${unbound}`;
  await recordReceipts(db, [delivered(unbound, 1, { notification_id: unbound, channel: "email" })]);
  await applyPendingReceipts(db);

  // Then many sends of the same provider.
  const many = Array.from({ length: 4000 }, () => randomUUID());
  await addSends(many);
  const batch = many.slice(0, 20);
  const read = await rowsRead((tx) => recordReceipts(tx, [...batch.map((id) => delivered(id)), ...batch.map(bounced)]));
  t.ok(read <= 40 * 8, `40 receipts, each a delivery and its bounce in one post: ${read} rows read`);
  const moved =
    await sql`select 1 from notification_channels where notification_id = any(${batch}) and status = 'bounced'`;
  t.equal(moved.length, 20, "each channel moved to its last status");

  // A send recorded after its receipt: the payload binds it.
  const late = many.slice(100, 120);
  await sql`update notification_channels set provider = null, provider_id = null where notification_id = any(${late})`;
  const bound = await rowsRead((tx) =>
    recordReceipts(
      tx,
      late.map((id) => delivered(id, 1, { notification_id: id, channel: "email" })),
    ),
  );
  t.ok(bound <= 20 * 8, `20 receipts bound by their payload: ${bound} rows read`);

  // Receipts waiting for their send, applied by the sweep.
  const waiting = many.slice(200, 220);
  await sql`update notification_channels set provider = null, provider_id = null where notification_id = any(${waiting})`;
  await recordReceipts(
    db,
    waiting.map((id) => delivered(id)),
  );
  await sql`update notification_channels set provider = 'sendgrid', provider_id = 'm-' || notification_id
    where notification_id = any(${waiting})`;
  const swept = await rowsReadAcross(() => applyPendingReceipts(db));
  t.ok(swept <= 20 * 12, `20 pending receipts applied by the sweep: ${swept} rows read`);
  const done = await sql`select 1 from notification_channels where notification_id = any(${[...late, ...waiting]})
    and status = 'delivered'`;
  t.equal(done.length, 40);
});

/**
 * Entries of provider_receipts the statements of `run` read: its indexes' entries and the rows of
 * its sequential scans (the cumulative statistics, flushed).
 */
async function receiptEntriesRead(run: () => Promise<unknown>): Promise<number> {
  const read = async () => {
    await generic`select pg_stat_force_next_flush()`;
    await generic`select pg_stat_clear_snapshot()`;
    const [r] = await generic<{ n: number }[]>`
      select ((select sum(idx_tup_read) from pg_stat_user_indexes where relname = 'provider_receipts')
        + (select seq_tup_read from pg_stat_user_tables where relname = 'provider_receipts'))::int as n`;
    return r?.n ?? 0;
  };
  const before = await read();
  await run();
  return (await read()) - before;
}

/**
 * Holds a snapshot open on another connection until the answered function is called: no entry of
 * a row dead since then is marked dead in the index by a scan that passes it, so each is read by
 * every scan that reaches it, as a bitmap scan reads them until a vacuum in any case.
 */
async function holdSnapshot(): Promise<() => Promise<void>> {
  const other = postgres(url, { max: 1, onnotice: () => {} });
  let release = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let taken = () => {};
  const held = new Promise<void>((resolve) => {
    taken = resolve;
  });
  const open = other.begin("isolation level repeatable read", async (tx) => {
    await tx`select 1`;
    taken();
    await released;
  });
  await held;
  return async () => {
    release();
    await open;
    await other.end();
  };
}

t.test("a later round finds its receipts by key, however many receipts waited for their send before", async (t) => {
  // The plans of a later round's statement and of the binding one, made while the table is nearly empty.
  const [first, unbound] = [randomUUID(), randomUUID()];
  await addSends([first, unbound]);
  await sql`update notification_channels set provider = null, provider_id = null where notification_id = ${unbound}`;
  await recordReceipts(db, [delivered(first), bounced(first)]);
  await recordReceipts(db, [delivered(unbound, 1, { notification_id: unbound, channel: "email" })]);

  const release = await holdSnapshot();
  t.teardown(release);
  // Receipts that arrived before their send was recorded, applied by the sweep: each leaves an
  // entry in the index of waiting receipts until a vacuum removes it.
  const early = Array.from({ length: 3000 }, () => randomUUID());
  await addSends(early);
  await sql`update notification_channels set provider = null, provider_id = null where notification_id = any(${early})`;
  await recordReceipts(
    sql,
    early.map((id) => delivered(id, 7)),
  );
  await sql`update notification_channels set provider = 'sendgrid', provider_id = 'm-' || notification_id
    where notification_id = any(${early})`;
  while ((await applyPendingReceipts(sql)) > 0) {}
  const [waited] = await sql<{ n: number }[]>`select count(*)::int as n from provider_receipts
    where applied_at is not null and event_id = any(${early.map((id) => `e7-${id}`)})`;
  t.equal(waited?.n, 3000, "the early receipts are applied");

  const batch = Array.from({ length: 20 }, () => randomUUID());
  await addSends(batch);
  const later = await receiptEntriesRead(() =>
    recordReceipts(db, [...batch.map((id) => delivered(id)), ...batch.map(bounced)]),
  );
  t.ok(later <= 40 * 4, `40 receipts, each a delivery and its bounce in one post: ${later} entries read`);
  const moved =
    await sql`select 1 from notification_channels where notification_id = any(${batch}) and status = 'bounced'`;
  t.equal(moved.length, 20, "each channel moved to its last status");

  const late = Array.from({ length: 20 }, () => randomUUID());
  await addSends(late);
  await sql`update notification_channels set provider = null, provider_id = null where notification_id = any(${late})`;
  const bound = await receiptEntriesRead(() =>
    recordReceipts(
      db,
      late.map((id) => delivered(id, 1, { notification_id: id, channel: "email" })),
    ),
  );
  t.ok(bound <= 20 * 4, `20 receipts bound by their payload: ${bound} entries read`);
  const done = await sql<{ n: number }[]>`select count(*)::int as n from notification_channels
    where notification_id = any(${late}) and status = 'delivered' and provider_id = 'm-' || notification_id`;
  t.equal(done[0]?.n, 20, "each channel bound and moved");
  const applied = await sql<{ n: number }[]>`select count(*)::int as n from provider_receipts
    where event_id = any(${[...batch.flatMap((id) => [`e1-${id}`, `e2-${id}`]), ...late.map((id) => `e1-${id}`)]})
      and applied_at is not null`;
  t.equal(applied[0]?.n, 60, "each receipt applied");
  const kept = await sql<{ n: number }[]>`select count(*)::int as n from provider_receipts
    where event_id = any(${late.map((id) => `e1-${id}`)}) and payload->>'notification_id' = substr(event_id, 4)`;
  t.equal(kept[0]?.n, 20, "each bound receipt keeps its payload");
});
