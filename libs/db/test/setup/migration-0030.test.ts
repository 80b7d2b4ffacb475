import { performance } from "node:perf_hooks";
import t from "tap";
import { acceptNotifications, findIdempotencyRecords, retireIdempotencyKeys } from "../../src/index.js";
import { acceptedRow as row } from "../support.js";
import { databaseAt, migrateTo } from "./migrations-support.js";

// Migration 0030 partitions the idempotency guard by day. The existing table is kept as
// `idempotency_keys_legacy` (renamed: nothing copied, no index built), and a request retried after
// the migration still meets the claim its first attempt made before it.
t.test("a request retried across the migration meets its first claim", async (t) => {
  const { url, sql } = await databaseAt(t, 29, 4);
  const database = { sql, close: () => sql.end(), ping: async () => true };
  // Claims made before the migration, as the previous release's accept statement made them:
  // 200,000 records of the last day, one of them the request to be retried, one past the window.
  await sql`
    insert into idempotency_keys (client_id, key, request_hash, notification_id, created_at)
    select 'bulk', 'k' || i, 'h', 'n' || i, now() - (i % 86000) * interval '1 second' from generate_series(1, 200000) i`;
  await sql`
    insert into idempotency_keys (client_id, key, request_hash, notification_id, created_at)
    values ('shop', 'retried', 'hash-retried', 'n-first', now() - interval '23 hours'),
           ('shop', 'expired', 'hash-expired', 'n-expired', now() - interval '25 hours')`;
  const started = performance.now();
  await migrateTo(url);
  const took = performance.now() - started;
  t.comment(`migrations 0030 and after, 200,002 records in the guard: ${(took / 1000).toFixed(2)} s`);

  const [legacy] = await sql<{ n: number }[]>`select count(*)::int as n from idempotency_keys_legacy`;
  t.equal(legacy?.n, 200_002, "the records are kept, where they were");
  const retried = row("shop", "retried");
  const expired = row("shop", "expired");
  const batch = await acceptNotifications(database, [retried, expired], 24);
  t.same([...batch.inserted], [expired.id], "the retried request is not accepted again; the expired key is");
  const records = await findIdempotencyRecords(database, [
    { clientId: "shop", key: "retried" },
    { clientId: "shop", key: "expired" },
  ]);
  t.same(
    records.map((r) => [r.key, r.notification_id]),
    [
      ["expired", expired.id],
      ["retried", "n-first"],
    ],
    "the retry reads its first claim",
  );

  // The previous release's claim names the old key: it fails (an error the client retries)
  // rather than claim the key a second time.
  await t.rejects(
    sql`
      insert into idempotency_keys (client_id, key, request_hash, notification_id, created_at)
      values ('shop', 'retried', 'hash-retried', 'n-again', now())
      on conflict (client_id, key) do nothing`,
    { code: "42P10" },
  );

  await retireIdempotencyKeys(database, 24);
  const [still] = await sql<{ n: number }[]>`select count(*)::int as n from idempotency_keys_legacy`;
  t.equal(still?.n, 200_002, "the legacy records stay while one is in the window");
  await sql`update idempotency_keys_legacy set created_at = created_at - interval '2 days'`;
  await retireIdempotencyKeys(database, 24);
  const [emptied] = await sql<{ n: number }[]>`select count(*)::int as n from idempotency_keys_legacy`;
  t.equal(emptied?.n, 0, "and are emptied at once when the last is past the window and a day");
});
