import { randomUUID } from "node:crypto";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import { recordRoutedChannels } from "../../src/index.js";

// A database with a history and no statistics (autovacuum not yet round, or off): routing a
// notification must look up whether it is routed by its key, not read every channel row.

const { database } = await freshDatabase(t);
const { sql } = database;

const addNotifications = (ids: string[]) =>
  sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    select id, 'c', 'u-' || id, 'promo', 'welcome', 'transactional', '{}', id, 'h', 0 from unnest(${ids}::text[]) id`;

t.test("routing reads a few channel rows, however many the table holds", async (t) => {
  const history = Array.from({ length: 20_000 }, () => randomUUID());
  await addNotifications(history);
  await sql`insert into notification_channels (notification_id, channel, status)
    select id, 'email', 'delivered' from unnest(${history}::text[]) id`;
  const id = randomUUID();
  await addNotifications([id]);
  const read = (await sql.begin(async (tx) => {
    const rows = async () => {
      const [r] = await tx<{ n: number }[]>`
        select sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))::int as n
        from pg_stat_xact_user_tables where relname ~ '^notification_channels(_p[0-9_]+|_default)?$'`;
      return r?.n ?? 0;
    };
    const before = await rows();
    const db = { ...database, sql: tx as unknown as typeof sql };
    t.same(
      await recordRoutedChannels(db, {
        notificationId: id,
        clientId: "c",
        userId: `u-${id}`,
        priority: "transactional",
        channels: [{ channel: "email", status: "pending", reason: null, nextAttemptAt: null }],
        deferredUntil: null,
        cap: null,
      }),
      { first: true, capped: false, throttled: false, held: false, earlier: null },
    );
    return (await rows()) - before;
  })) as number;
  t.ok(read <= 20, `one notification routed: ${read} channel rows read`);
});
