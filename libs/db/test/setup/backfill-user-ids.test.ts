import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { freshDatabase, idAt } from "@notify/testing";
import t from "tap";

// The backfill docs/capacity.md gives the operator ("Rows written before migration 0029"), run as
// written: each row of the log's six tables written without its user gets its notification's, in
// batches, and a row whose notification is gone stays as it is.
const { database } = await freshDatabase(t);
const { sql } = database;

const doc = readFileSync(join(dirname(fileURLToPath(import.meta.url)), "../../../../docs/capacity.md"), "utf8");
const section = doc.slice(doc.indexOf("### Rows written before migration 0029"));
const backfill = /```sql\n([\s\S]*?)```/.exec(section)?.[1] ?? "";

const TABLES = [
  "notification_channels",
  "channel_status_events",
  "delivery_attempts",
  "notification_fallbacks",
  "digest_items",
  "webhook_completion_checks",
];

t.test("the documented backfill fills in every old row from its notification", async (t) => {
  t.match(backfill, /^DO \$\$/, "the section gives the statement");
  // Rows of 2,500 notifications as the old version wrote them (no user), over more than one batch,
  // and the rows of one notification no longer there.
  const ids = Array.from({ length: 2500 }, (_, i) => idAt(Date.now() - 60_000 + i));
  const gone = idAt(Date.now() - 120_000);
  await sql`
    insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    select id, 'c', 'u-' || (ordinality % 97), 'account', 'welcome', 'transactional', '{}', id, 'h', 0
    from unnest(${ids}::text[]) with ordinality id`;
  const all = [...ids, gone];
  await sql`insert into notification_channels (notification_id, channel, status) select id, 'email', 'delivered' from unnest(${all}::text[]) id`;
  await sql`
    insert into channel_status_events (notification_id, channel, status, attempt)
    select id, 'email', s, 1 from unnest(${all}::text[]) id cross join unnest(array['pending', 'delivered']) s`;
  await sql`insert into delivery_attempts (notification_id, channel, attempt, outcome) select id, 'email', 1, 'accepted' from unnest(${all}::text[]) id`;
  await sql`insert into notification_fallbacks (notification_id, steps, watching) select id, '[]', 'email' from unnest(${all}::text[]) id`;
  await sql`insert into digest_items (notification_id, digest_id) select id, 'd' from unnest(${all}::text[]) id`;
  await sql`insert into webhook_completion_checks (notification_id) select id from unnest(${all}::text[]) id`;

  await sql.unsafe(backfill);

  for (const table of TABLES) {
    const [row] = await sql<{ wrong: number; filled: number; left: string[] }[]>`
      select count(*) filter (where x.user_id is distinct from n.user_id and n.id is not null)::int as wrong,
        count(*) filter (where x.user_id is not null)::int as filled,
        coalesce(array_agg(distinct x.notification_id) filter (where x.user_id is null), '{}') as left
      from ${sql(table)} x left join notifications n on n.id = x.notification_id`;
    t.equal(row?.wrong, 0, `${table}: every row has its notification's user`);
    t.equal(
      row?.filled,
      table === "channel_status_events" ? 5000 : 2500,
      `${table}: every row of a notification filled`,
    );
    t.same(row?.left, [gone], `${table}: the row of a notification no longer there stays null`);
  }
  // Run again: nothing left to do, nothing changed.
  await sql.unsafe(backfill);
  const [again] = await sql<
    { count: number }[]
  >`select count(*)::int as count from notification_channels where user_id is null`;
  t.equal(again?.count, 1, "a second run leaves the rows as they were");
});
