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
        from pg_stat_xact_user_tables where relname in ('notification_channels', 'provider_receipts')`;
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
      from pg_stat_user_tables where relname in ('notification_channels', 'provider_receipts')`;
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
