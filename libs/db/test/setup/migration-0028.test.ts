import { performance } from "node:perf_hooks";
import { newId } from "@notify/core";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import postgres from "postgres";
import t from "tap";
import { MIGRATIONS_FOLDER, runMigrations } from "../../src/setup/migrate.js";
import { databaseAt } from "./migrations-support.js";

// Migration 0028 turns the notification log (notifications, channels, status history, attempts,
// fallback chains) into tables partitioned by id range, the existing tables becoming the `_p0`
// partitions, on a deployment that keeps running: the service's statements wait for it, none
// fails, and nothing it writes meanwhile is lost or lands outside its range.
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

t.test("a status move in flight when 0028 starts is not cancelled as a deadlock, nor is the migration", async (t) => {
  const { url, sql } = await databaseAt(t, 27);
  const id = newId();
  await sql`
    insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, 'shop', 'u1', 'orders', 'welcome', 'transactional', '{}', 'k1', 'h', 0)`;
  await sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'email', 'pending')`;
  const worker = postgres(url, { max: 1, onnotice: () => {} });
  const migrator = postgres(url, { max: 1, onnotice: () => {} });
  t.teardown(async () => {
    await worker.end();
    await migrator.end();
  });
  const [me] = await migrator<{ pid: number }[]>`select pg_backend_pid() as pid`;
  const waitsForLock = async () => {
    const [row] = await sql<{ wait: string | null }[]>`
      select wait_event_type as wait from pg_stat_activity where pid = ${me?.pid ?? 0}`;
    return row?.wait === "Lock";
  };

  let migrated: unknown = "pending";
  let migration: Promise<void> = Promise.resolve();
  // A worker's transaction as a status move or a receipt writes it: the channel row first, then
  // its history row (lock-order.ts). The migration starts between the two.
  await worker.begin(async (tx) => {
    await tx`update notification_channels set status = 'sent' where notification_id = ${id} and channel = 'email'`;
    migration = migrate(drizzle(migrator), { migrationsFolder: MIGRATIONS_FOLDER }).then(
      () => {
        migrated = true;
      },
      (error: unknown) => {
        migrated = error;
      },
    );
    const deadline = Date.now() + 10_000;
    while (!(await waitsForLock()) && Date.now() < deadline) await sleep(5);
    t.ok(Date.now() < deadline, "the migration waits for the worker's lock");
    await tx`insert into channel_status_events (notification_id, channel, status, attempt) values (${id}, 'email', 'sent', 1)`;
  });
  await migration;
  t.equal(migrated, true, "the migration completes");
  const [row] = await sql<{ status: string; events: number }[]>`
    select c.status, (select count(*)::int from channel_status_events e where e.notification_id = c.notification_id) as events
    from notification_channels c where c.notification_id = ${id}`;
  t.same(row, { status: "sent", events: 1 }, "the worker's move is committed");
});

/** The log's tables with their partition key, and the two tables 0028 only unlinks from them. */
const LOG = [
  ["notifications", "id"],
  ["notification_channels", "notification_id"],
  ["channel_status_events", "notification_id"],
  ["delivery_attempts", "notification_id"],
  ["notification_fallbacks", "notification_id"],
] as const;
const UNLINKED = ["deferred_notifications", "digest_items"] as const;
const LEGACY = 5;

/**
 * A million notifications over the last 60 days with UUIDv7 ids (made from their time in SQL: the
 * helpers of 0028 do not exist yet), each with its channel row, one or two history rows and an
 * attempt line; some with a fallback chain, a deferral or a digest item; and a few rows with ids
 * of another shape ('n-1'). The foreign keys' checks (a lock on the notification's row per row)
 * and the triggers are off while it loads and the notifications' other indexes are built after
 * it, as fast as a restore: the schema 0028 meets is the one before it, rows consistent.
 */
async function load(sql: postgres.Sql): Promise<void> {
  const tables = [...LOG.map(([table]) => table), ...UNLINKED];
  for (const table of tables) await sql`alter table ${sql(table)} disable trigger all`;
  const indexes = await sql<{ name: string; def: string }[]>`
    select i.indexrelid::regclass::text as name, pg_get_indexdef(i.indexrelid) as def from pg_index i
    where i.indrelid = 'notifications'::regclass
      and not exists (select 1 from pg_constraint c where c.conindid = i.indexrelid)`;
  for (const { name } of indexes) await sql`drop index ${sql(name)}`;
  // One every 5.2 s: the 48-bit millisecond, version 7, the variant, random bits.
  await sql`
    insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key,
      request_hash, partition, created_at)
    select substr(r.ms, 1, 8) || '-' || substr(r.ms, 9, 4) || '-7' || lpad(to_hex(n % 4096), 3, '0') || '-'
        || to_hex(8 + n % 4) || lpad(to_hex((random() * 4095)::int), 3, '0') || '-'
        || lpad(to_hex((random() * 281474976710655)::bigint), 12, '0'),
      'shop', 'u' || (n % 20000), 'orders', 'welcome', 'transactional', '{"order": "A-1"}', 'k' || n, 'h', n % 16, t.at
    from generate_series(1, 1000000) n
    cross join lateral (select now() - interval '60 days' * (1 - n / 1000000.0) - interval '1 minute' as at) t
    cross join lateral (select lpad(to_hex((extract(epoch from t.at) * 1000)::bigint), 12, '0') as ms) r`;
  for (const { def } of indexes) await sql.unsafe(def);
  await sql`
    insert into notification_channels (notification_id, channel, status, provider, provider_id, attempts, updated_at,
      routed_at, routed_status)
    select id, 'email', case when partition = 0 then 'pending' else 'delivered' end, 'ses', 'ses-' || id, 1,
      created_at, created_at, 'pending'
    from notifications`;
  await sql`
    insert into channel_status_events (notification_id, channel, status, attempt, provider_id, at)
    select n.id, 'email', s.status, 1, 'ses-' || n.id, n.created_at from notifications n
    cross join lateral (select 'sent' as status union all select 'delivered' where n.partition % 2 = 0) s`;
  await sql`
    insert into delivery_attempts (notification_id, channel, attempt, outcome, provider_id, provider, at)
    select id, 'email', 1, 'sent', 'ses-' || id, 'ses', created_at from notifications`;
  await sql`
    insert into notification_fallbacks (notification_id, steps, watching, created_at)
    select id, '[{"from": "email", "to": "sms"}]', 'email', created_at from notifications where partition = 1`;
  await sql`
    insert into deferred_notifications (notification_id, user_id, due_at, created_at)
    select id, user_id, now() + interval '1 day', created_at from notifications
    where partition = 2 and dedup_key like '%0'`;
  await sql`
    insert into digests (id, client_id, user_id, template_id, key, status, max_items, closes_at)
    values ('d-open', 'shop', 'u1', 'welcome', 'daily', 'open', 100000, now() + interval '1 day')`;
  await sql`
    insert into digest_items (notification_id, digest_id, joined_at)
    select id, 'd-open', created_at from notifications where partition = 3 and dedup_key like '%1'`;
  await sql`
    insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key,
      request_hash, partition, created_at)
    select 'n-' || n, 'shop', 'u1', 'orders', 'welcome', 'transactional', '{}', 'legacy-' || n, 'h', 0,
      now() - interval '1 day'
    from generate_series(1, ${LEGACY}) n`;
  await sql`
    insert into notification_channels (notification_id, channel, status)
    select 'n-' || n, 'email', 'delivered' from generate_series(1, ${LEGACY}) n`;
  await sql`
    insert into channel_status_events (notification_id, channel, status, attempt)
    select 'n-' || n, 'email', 'delivered', 1 from generate_series(1, ${LEGACY}) n`;
  await sql`
    insert into delivery_attempts (notification_id, channel, attempt, outcome)
    select 'n-' || n, 'email', 1, 'sent' from generate_series(1, ${LEGACY}) n`;
  await sql`
    insert into notification_fallbacks (notification_id, steps, watching)
    select 'n-' || n, '[]', 'email' from generate_series(1, 2) n`;
  for (const table of tables) await sql`alter table ${sql(table)} enable trigger all`;
  await sql`analyze`;
}

/** What a writer met: its statements, those that failed, and the longest it waited for one. */
interface Writer {
  statements: number;
  errors: string[];
  longestMs: number;
}
const writer = (): Writer => ({ statements: 0, errors: [], longestMs: 0 });

/** Runs one of a writer's statements (or transactions), timing it and keeping its error. */
async function timed<T>(w: Writer, what: string, run: () => Promise<T>): Promise<T | undefined> {
  const started = performance.now();
  try {
    return await run();
  } catch (error) {
    w.errors.push(`${what}: ${String(error)}`);
    return undefined;
  } finally {
    w.statements++;
    w.longestMs = Math.max(w.longestMs, performance.now() - started);
  }
}

/** A history row a writer inserted, with when its statement ran (performance.now()). */
interface Event {
  id: number;
  startedAt: number;
  endedAt: number;
}

/** The relations a plan reads. */
function relations(plan: unknown): string[] {
  if (Array.isArray(plan)) return plan.flatMap(relations);
  if (plan === null || typeof plan !== "object") return [];
  const node = plan as Record<string, unknown>;
  const own = typeof node["Relation Name"] === "string" ? [node["Relation Name"]] : [];
  return [...own, ...Object.values(node).flatMap(relations)];
}

t.test("0028 on a million notifications while the service writes: nothing fails, nothing is lost", async (t) => {
  const { url, sql } = await databaseAt(t, 27);
  const loadStarted = performance.now();
  await load(sql);
  const loadMs = performance.now() - loadStarted;

  const loaded = new Map<string, { total: number; legacy: number }>();
  for (const [table, key] of [...LOG, ...UNLINKED.map((table) => [table, "notification_id"] as const)]) {
    const [row] = await sql<{ total: number; legacy: number }[]>`
      select count(*)::int as total, count(*) filter (where ${sql(key)} like 'n-%')::int as legacy from ${sql(table)}`;
    loaded.set(table, row ?? { total: 0, legacy: 0 });
  }
  t.equal(loaded.get("notifications")?.total, 1_000_000 + LEGACY, "a million notifications loaded");
  const [{ maxEvent } = { maxEvent: 0 }] = await sql<{ maxEvent: number }[]>`
    select max(id)::float8 as "maxEvent" from channel_status_events`;
  const sample = (
    await sql<
      { id: string }[]
    >`select id from notifications tablesample bernoulli (0.05) where id not like 'n-%' limit 100`
  ).map((r) => r.id);

  // The service: ingest and routing write new notifications and their channels (and read them
  // back by id); a worker moves the channels of older ones, its channel row then its history row.
  const ingestSql = postgres(url, { max: 1, onnotice: () => {} });
  const workerSql = postgres(url, { max: 1, onnotice: () => {} });
  t.teardown(async () => {
    await ingestSql.end();
    await workerSql.end();
  });
  const ingest = writer();
  const worker = writer();
  const written: string[] = [];
  const events: Event[] = [];
  const moves = new Map<string, number>();
  let stopping = false;
  let migrationStarted = Number.POSITIVE_INFINITY;
  let migrationEnded = Number.POSITIVE_INFINITY;
  let writtenAtEnd = Number.POSITIVE_INFINITY;
  const afterMigration = () => Math.max(0, written.length - writtenAtEnd);

  const ingesting = (async () => {
    for (let n = 0; !stopping; n++) {
      const id = newId();
      await timed(
        ingest,
        "insert notification",
        () => ingestSql`
          insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
          values (${id}, 'shop', ${`u${n % 50}`}, 'orders', 'welcome', 'transactional', '{}', ${`w-${id}`}, 'h', 0)`,
      );
      await timed(
        ingest,
        "insert channel",
        () => ingestSql`
          insert into notification_channels (notification_id, channel, status) values (${id}, 'email', 'pending')`,
      );
      const startedAt = performance.now();
      const [event] =
        (await timed(
          ingest,
          "insert history",
          () => ingestSql<{ id: number }[]>`
            insert into channel_status_events (notification_id, channel, status, attempt)
            values (${id}, 'email', 'pending', 0) returning id::float8 as id`,
        )) ?? [];
      if (event) events.push({ id: event.id, startedAt, endedAt: performance.now() });
      const read = await timed(ingest, "read by id", () => ingestSql`select id from notifications where id = ${id}`);
      if (read?.length !== 1) ingest.errors.push(`${id} was not read back`);
      written.push(id);
    }
  })();
  const working = (async () => {
    for (let n = 0; !stopping; n++) {
      const id = sample[n % sample.length] as string;
      const startedAt = performance.now();
      const event = await timed(worker, "status move", () =>
        workerSql.begin(async (tx) => {
          await tx`
            update notification_channels set attempts = attempts + 1, updated_at = now()
            where notification_id = ${id} and channel = 'email'`;
          const [row] = await tx<{ id: number }[]>`
            insert into channel_status_events (notification_id, channel, status, attempt)
            values (${id}, 'email', 'sent', 2) returning id::float8 as id`;
          return row?.id;
        }),
      );
      if (event !== undefined) {
        events.push({ id: event, startedAt, endedAt: performance.now() });
        moves.set(id, (moves.get(id) ?? 0) + 1);
      }
    }
  })();
  const until = async (done: () => boolean) => {
    const deadline = Date.now() + 60_000;
    while (!done() && Date.now() < deadline) await sleep(10);
  };

  await until(() => written.length >= 20 && worker.statements >= 20);
  migrationStarted = performance.now();
  await runMigrations(url);
  migrationEnded = performance.now();
  writtenAtEnd = written.length;
  await until(() => afterMigration() >= 20);
  stopping = true;
  await Promise.all([ingesting, working]);
  const migrationMs = migrationEnded - migrationStarted;

  t.same([...ingest.errors, ...worker.errors], [], "every statement of the service succeeds");
  t.ok(afterMigration() >= 20, "the service writes after the migration");
  t.comment(`load of 1,000,000 notifications and their rows: ${seconds(loadMs)}`);
  t.comment(`migration 0028: ${seconds(migrationMs)}`);
  t.comment(
    `longest wait: ingest statement ${seconds(ingest.longestMs)}, worker transaction ${seconds(worker.longestMs)} ` +
      `(${ingest.statements} ingest statements, ${worker.statements} worker transactions)`,
  );

  // The cut: every id before it is in `_p0`.
  const [p0] = await sql<{ to_id: string; to_at: Date }[]>`
    select to_id, to_at from notify_log_partitions where suffix = '_p0' and from_id is null`;
  t.ok(p0, "the first partition runs from MINVALUE");
  const cut = p0?.to_id ?? "";
  const before = written.filter((id) => id < cut);
  const after = written.filter((id) => id >= cut);
  t.ok(after.length >= 20, "the writer's later rows are past the cut");
  const workerMoves = [...moves.values()].reduce((a, b) => a + b, 0);

  const dated = (table: string, part: string) => new RegExp(`^${table}_p\\d{8}(_\\d{6})?$`).test(part);
  for (const [table, key] of LOG) {
    const writes = table === "notifications" || table === "notification_channels" || table === "channel_status_events";
    const parts = await sql<{ part: string; rows: number }[]>`
      select p.relname as part, count(*)::int as rows
      from ${sql(table)} x join pg_class p on p.oid = x.tableoid group by 1`;
    const rows = (which: (part: string) => boolean) =>
      parts.filter((p) => which(p.part)).reduce((sum, p) => sum + p.rows, 0);
    const was = loaded.get(table) ?? { total: 0, legacy: 0 };
    const extra = table === "channel_status_events" ? workerMoves : 0;
    t.same(
      {
        p0: rows((p) => p === `${table}_p0`),
        default: rows((p) => p === `${table}_default`),
        dated: rows((p) => dated(table, p)),
        other: rows((p) => p !== `${table}_p0` && p !== `${table}_default` && !dated(table, p)),
      },
      {
        p0: was.total - was.legacy + (writes ? before.length : 0) + extra,
        default: was.legacy,
        dated: writes ? after.length : 0,
        other: 0,
      },
      `${table}: the old rows in _p0, the other shapes in _default, the later rows in dated partitions`,
    );
    if (!writes) continue;
    const placed = await sql<{ id: string; part: string }[]>`
      select x.${sql(key)} as id, p.relname as part
      from ${sql(table)} x join pg_class p on p.oid = x.tableoid where x.${sql(key)} = any(${written})`;
    t.equal(placed.length, written.length, `${table}: every row the writer wrote is there`);
    t.same(
      placed.filter((r) => (r.id < cut ? r.part !== `${table}_p0` : !dated(table, r.part))),
      [],
      `${table}: each of the writer's rows in its range's partition`,
    );
  }
  for (const table of UNLINKED) {
    const [row] = await sql<{ total: number }[]>`select count(*)::int as total from ${sql(table)}`;
    t.equal(row?.total, loaded.get(table)?.total, `${table}: unchanged`);
  }
  const channels = await sql<{ id: string; attempts: number }[]>`
    select notification_id as id, attempts from notification_channels where notification_id = any(${sample})`;
  t.same(
    channels.filter((c) => c.attempts !== 1 + (moves.get(c.id) ?? 0)),
    [],
    "every status move of the worker is kept",
  );

  const partitions = await sql<{ suffix: string; to_at: Date | null; is_default: boolean }[]>`
    select suffix, to_at, is_default from notify_log_partitions order by from_id nulls first`;
  t.ok(
    partitions.some((p) => p.suffix === "_default" && p.is_default),
    "the default partition is listed",
  );
  const through = Math.max(...partitions.map((p) => p.to_at?.getTime() ?? 0));
  t.ok(p0 && through >= p0.to_at.getTime() + 7 * 86_400_000, "partitions reach 7 days past the migration");
  t.ok(partitions.filter((p) => /^_p\d{8}$/.test(p.suffix)).length >= 7, "at least 7 whole days");

  // The history's ids go on from the identity's: every id taken after the migration is above
  // every id taken before it, and no id is taken twice.
  const idsBefore = events.filter((e) => e.endedAt < migrationStarted).map((e) => e.id);
  const idsAfter = events.filter((e) => e.startedAt > migrationEnded).map((e) => e.id);
  t.ok(idsBefore.length > 0 && idsAfter.length > 0, "history rows before and after the migration");
  const maxBefore = Math.max(maxEvent, ...idsBefore);
  const minAfter = Math.min(...idsAfter);
  t.ok(minAfter > maxBefore, `history ids go on increasing (${maxBefore} before, ${minAfter} after)`);
  const [dupes] = await sql<{ n: number }[]>`
    select (count(*) - count(distinct id))::int as n from channel_status_events`;
  t.equal(dupes?.n, 0, "no history id taken twice");
  const [serial] = await sql<{ seq: string | null }[]>`
    select pg_get_serial_sequence('channel_status_events', 'id') as seq`;
  t.equal(serial?.seq, "public.channel_status_events_id_seq", "the sequence belongs to the partitioned table");

  const triggers = await sql<{ name: string; table: string; kind: string }[]>`
    select t.tgname as name, c.relname as table, c.relkind::text as kind from pg_trigger t
    join pg_class c on c.oid = t.tgrelid
    where t.tgname in ('webhook_notifications_accepted', 'webhook_channels_inserted', 'webhook_channels_updated',
      'webhook_fallback_taken')
    order by 1`;
  t.same(
    triggers,
    [
      { name: "webhook_channels_inserted", table: "notification_channels", kind: "p" },
      { name: "webhook_channels_updated", table: "notification_channels", kind: "p" },
      { name: "webhook_fallback_taken", table: "notification_fallbacks", kind: "p" },
      { name: "webhook_notifications_accepted", table: "notifications", kind: "p" },
    ],
    "the webhook triggers are on the partitioned tables",
  );
  const [fks] = await sql<{ n: number }[]>`
    select count(*)::int as n from pg_constraint where contype = 'f' and confrelid = 'notifications'::regclass`;
  t.equal(fks?.n, 0, "nothing references the notifications any more");

  const scanned = async (id: string) => {
    const [row] = await sql<
      { "QUERY PLAN": unknown }[]
    >`explain (format json) select * from notifications where id = ${id}`;
    return relations(row?.["QUERY PLAN"]);
  };
  t.same(await scanned(sample[0] as string), ["notifications_p0"], "an old id: _p0 alone");
  const later = await scanned(after[0] as string);
  t.ok(later.length === 1 && dated("notifications", later[0] as string), `a later id: its day alone (${later})`);
  t.same(await scanned("n-1"), ["notifications_default"], "an id of another shape: the default partition alone");
});
