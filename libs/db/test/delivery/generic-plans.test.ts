import { randomUUID } from "node:crypto";
import { freshDatabase } from "@notify/testing";
import postgres from "postgres";
import t from "tap";
import { loadChannel } from "../../src/index.js";

// A prepared statement's plan is made once per connection and kept: on a fresh database (no
// statistics, autovacuum not yet round) the plan a worker's read of its channels gets while the
// table is nearly empty is the plan it keeps as the table fills. Whatever plan PostgreSQL picks,
// the read must cost a few index entries, never a read of every channel.

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

/** Rows of notification_channels (all its partitions) read by `run`, in one transaction. */
async function rowsRead(run: (tx: typeof sql) => Promise<unknown>): Promise<number> {
  return generic.begin(async (tx) => {
    const read = async () => {
      const [r] = await tx<{ n: number }[]>`
        select sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::int as n
        from pg_stat_xact_user_tables where relname ~ '^notification_channels(_p[0-9_]+|_default)?$'`;
      return r?.n ?? 0;
    };
    const before = await read();
    await run(tx as unknown as typeof sql);
    return (await read()) - before;
  }) as Promise<number>;
}

t.test(
  "a worker's read of its channels reads a few rows each, whatever the table held when their plans were made",
  async (t) => {
    const [first] = [randomUUID()];
    await addSends([first as string]);
    await loadChannel(db, { notification_id: first as string, channel: "email", user_id: "u" });
    const many = Array.from({ length: 4000 }, () => randomUUID());
    await addSends(many);
    const refs = many.slice(0, 20).map((id) => ({ notification_id: id, channel: "email" as const, user_id: "u" }));
    const reads = await rowsRead((tx) => Promise.all(refs.map((ref) => loadChannel(tx, ref))));
    t.ok(reads <= 20 * 4, `20 channels read: ${reads} rows read`);
    t.same(
      (await Promise.all(refs.map((ref) => loadChannel(db, ref)))).map((row) => row?.status),
      refs.map(() => "pending"),
      "each channel as it is",
    );
  },
);
