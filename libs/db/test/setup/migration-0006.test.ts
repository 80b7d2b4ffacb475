import { randomBytes } from "node:crypto";
import { TEST_PG_URL } from "@notify/testing";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";
import t from "tap";
import { MIGRATIONS_FOLDER } from "../../src/setup/migrate.js";
import { foldersUpTo } from "./migrations-support.js";

// Migration 0006 replaces notifications.published_at with publish_outbox: rows the previous
// version left unpublished must end up in the outbox (in batches of at most 500), published
// ones must not, and the old columns must be gone.
const name = `notify_m_${randomBytes(6).toString("hex")}`;
const admin = postgres(TEST_PG_URL, { max: 1, onnotice: () => {} });
await admin.unsafe(`create database ${name}`);
const url = new URL(TEST_PG_URL);
url.pathname = `/${name}`;
const sql = postgres(url.toString(), { max: 1, onnotice: () => {} });
t.teardown(async () => {
  await sql.end();
  await admin.unsafe(`drop database if exists ${name} with (force)`);
  await admin.end();
});

t.test("unpublished rows move to the outbox in batches of 500; published ones do not", async (t) => {
  await migrate(drizzle(sql), { migrationsFolder: foldersUpTo(5) });
  await sql`
    insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key,
      request_hash, partition, created_at, published_at)
    select 'n' || lpad(n::text, 5, '0'), 'shop', 'u', 'orders', 'welcome', 'transactional', '{}', 'k' || n, 'h', 0,
      now() - make_interval(secs => 2000 - n), case when n % 400 = 0 then now() else null end
    from generate_series(1, 1203) n`;
  const unpublished = (
    await sql<{ id: string }[]>`select id from notifications where published_at is null order by created_at, id`
  ).map((r) => r.id);
  t.equal(unpublished.length, 1200);

  await migrate(drizzle(sql), { migrationsFolder: MIGRATIONS_FOLDER });
  const rows = await sql<{ notification_ids: string[] }[]>`select notification_ids from publish_outbox order by id`;
  t.same(
    rows.map((r) => r.notification_ids.length),
    [500, 500, 200],
    "three batches",
  );
  t.same(
    rows.flatMap((r) => r.notification_ids),
    unpublished,
    "exactly the unpublished rows, oldest first",
  );
  const columns = await sql<{ table_name: string; column_name: string }[]>`
    select table_name, column_name from information_schema.columns
    where (table_name = 'notifications' and column_name = 'published_at')
       or (table_name = 'idempotency_keys' and column_name = 'state')`;
  t.same(columns, [], "the old columns are gone");
});
