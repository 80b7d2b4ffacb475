// node bench/retention.mjs: what retiring a day of notifications costs, by partition and by the
// row-by-row batched deletes, in the same run on the same database. BENCH_RETENTION_NOTIFICATIONS
// (1,000,000) email notifications of one day, each with its channel row, three status events
// (pending, sent, delivered), its attempt and SendGrid's two receipts (processed, delivered), all
// with the user id the service writes, are written server-side twice: once into a day's
// range partition of the log (UUIDv7 ids of that day, as ingest makes them), once into the
// default partition (ids of another shape: the rows retention can only take one by one). Then
// each is retired as the processor's retention job does it, into an archive folder: the range by
// detaching, archiving and dropping it (libs/ops retirePartitions), the default partition's rows
// by archiveAll's transactions of ARCHIVE_BATCH (1,000). For each: seconds, WAL bytes written (the
// server's, pg_current_wal_lsn), and what the log's tables occupy afterwards against before the
// load (the bloat a delete leaves until a vacuum), with the dead tuples left. The archive writes
// are part of both. BENCH_REPEAT runs (1 by default: a run loads 12 million rows).
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { logPartitions } from "@notify/db";
import { archiveAll, folderStore, retirePartitions } from "@notify/ops";
import { benchDatabase } from "./lib.mjs";

const N = Number(process.env.BENCH_RETENTION_NOTIFICATIONS ?? 1_000_000);
const REPEAT = Number(process.env.BENCH_REPEAT ?? 1);
const DAY_MS = 86_400_000;
const LOG = [
  "notifications",
  "notification_channels",
  "channel_status_events",
  "delivery_attempts",
  "provider_receipts",
];
const teardowns = [];
const t = { teardown: (fn) => teardowns.push(fn) };

/** A UUIDv7 of `at` (a SQL timestamptz expression) and the row number i, or an id of another shape. */
const uuidAt = (at) =>
  `overlay(notify_log_bound(${at}) placing '7' || lpad(to_hex(i % 4096), 3, '0') || '-8'
     || lpad(to_hex((i / 4096) % 4096), 3, '0') || '-' || lpad(to_hex(i), 12, '0') from 15)`;

/** Writes N notifications of one day with what hangs off them; `id` is a SQL expression of i and at. */
async function load(sql, { id, dayStart, createdAt }) {
  const rows = `select i, ${id} as id, ${createdAt} as at
    from (select i, $1::timestamptz + make_interval(secs => (i::float8 * 86399 / $2::int)) as day_at
          from generate_series(1, $2::int) i) g`;
  await sql.begin(async (tx) => {
    await tx`set local statement_timeout = 0`;
    const day = dayStart.toISOString();
    await tx.unsafe(
      `insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key,
         request_hash, partition, created_at)
       select id, 'bench', 'retention-' || (i % 100000), 'account', 'welcome', 'transactional',
         jsonb_build_object('name', 'Ada ' || i), id, md5(i::text), i % 16, at from (${rows}) r`,
      [day, N],
    );
    await tx.unsafe(
      `insert into notification_channels (notification_id, channel, status, provider, provider_id, attempts, updated_at,
         user_id)
       select id, 'email', 'delivered', 'sendgrid', 'sg-' || id, 1, at, 'retention-' || (i % 100000) from (${rows}) r`,
      [day, N],
    );
    await tx.unsafe(
      `insert into channel_status_events (notification_id, channel, status, attempt, provider_id, at, user_id)
       select id, 'email', s.status, s.attempt, 'sg-' || id, at, 'retention-' || (i % 100000) from (${rows}) r
       cross join (values ('pending', 0), ('sent', 1), ('delivered', 1)) s(status, attempt)`,
      [day, N],
    );
    await tx.unsafe(
      `insert into delivery_attempts (notification_id, channel, attempt, outcome, provider, provider_id, at, user_id)
       select id, 'email', 1, 'sent', 'sendgrid', 'sg-' || id, at, 'retention-' || (i % 100000) from (${rows}) r`,
      [day, N],
    );
    // SendGrid's events name the notification in their custom args, which keys each receipt.
    await tx.unsafe(
      `insert into provider_receipts (provider, event_id, provider_id, notification_id, status, payload, received_at,
         applied_at)
       select 'sendgrid', 'sg-' || id || '-' || e.event, 'sg-' || id, id, e.event,
         jsonb_build_object('event', e.event, 'sg_message_id', 'sg-' || id, 'notification_id', id, 'channel', 'email'),
         at, at
       from (${rows}) r cross join (values ('processed'), ('delivered')) e(event)`,
      [day, N],
    );
  });
}

/** Bytes the log's tables and indexes occupy, all partitions included, and their dead tuples. */
async function footprint(sql) {
  const [row] = await sql`
    select coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint as bytes,
           coalesce(sum(s.n_dead_tup), 0)::bigint as dead
    from pg_class c
    left join pg_stat_user_tables s on s.relid = c.oid
    where c.relkind = 'r' and c.relname ~ ${`^(${LOG.join("|")})(_|$)`}`;
  return { bytes: Number(row.bytes), dead: Number(row.dead) };
}

const lsn = async (sql) => (await sql`select pg_current_wal_lsn() as lsn`)[0].lsn;
const walBetween = async (sql, from) =>
  Number((await sql`select pg_wal_lsn_diff(pg_current_wal_lsn(), ${from}::pg_lsn)::bigint as bytes`)[0].bytes);
const mb = (bytes) => `${(bytes / 1_048_576).toFixed(1)} MB`;

/** Bytes of the archive objects under `dir` whose name ends with `suffix`. */
const archiveBytes = (dir, suffix) =>
  readdirSync(dir, { recursive: true })
    .filter((name) => String(name).endsWith(suffix))
    .reduce((sum, name) => sum + statSync(join(dir, String(name))).size, 0);

async function measure(sql, retire) {
  await sql`checkpoint`;
  const before = await footprint(sql);
  const from = await lsn(sql);
  const started = performance.now();
  const retired = await retire();
  const seconds = (performance.now() - started) / 1000;
  const wal = await walBetween(sql, from);
  // The statistics collector reports dead tuples a moment later.
  await new Promise((r) => setTimeout(r, 1500));
  const after = await footprint(sql);
  return { retired, seconds, wal, before, after };
}

const runs = { partition: [], rows: [] };
try {
  for (let run = 1; run <= REPEAT; run++) {
    const { database } = await benchDatabase(t, "fresh");
    const { sql } = database;
    const dir = mkdtempSync(join(tmpdir(), "notify-bench-retention-"));
    teardowns.push(() => rmSync(dir, { recursive: true, force: true }));
    const store = folderStore(dir);

    // A whole day's range partition: the first that starts at midnight, a day or more ahead.
    const day = (await logPartitions(database)).find((p) => p.fromAt && p.fromAt.getTime() > Date.now() + DAY_MS);
    if (!day) throw new Error("no whole day's partition ahead");
    const empty = await footprint(sql);
    let started = performance.now();
    await load(sql, { id: uuidAt("day_at"), dayStart: day.fromAt, createdAt: "day_at" });
    console.log(
      `run ${run}: loaded ${N} notifications into ${day.suffix} in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
    const written = () => archiveBytes(dir, ".ndjson.gz");
    const byPartition = await measure(sql, () =>
      // As the job would once the day is past a one-day window.
      retirePartitions(database, { store, days: 1, asOf: new Date(day.toAt.getTime() + DAY_MS) }),
    );
    byPartition.archive = written();
    byPartition.before.bytes -= empty.bytes;
    // Dropped partitions take their empty tables with them: nothing is left below empty.
    byPartition.after.bytes = Math.max(0, byPartition.after.bytes - empty.bytes);

    // The same day, 100 days ago, in the default partition: retention's row-by-row path.
    const old = new Date(day.fromAt.getTime() - 100 * DAY_MS);
    started = performance.now();
    await load(sql, { id: "'bench-' || i", dayStart: old, createdAt: "day_at" });
    console.log(
      `run ${run}: loaded ${N} notifications into the default partition in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
    const byRows = await measure(sql, () => archiveAll(database, { store, days: 90 }));
    byRows.archive = written() - byPartition.archive;
    byRows.before.bytes -= empty.bytes;
    byRows.after.bytes = Math.max(0, byRows.after.bytes - empty.bytes);
    for (const [name, m] of [
      ["by partition (detach, archive, drop)", byPartition],
      ["by batched deletes (archiveAll)", byRows],
    ]) {
      console.log(
        `run ${run}: ${name}: ${m.seconds.toFixed(1)} s, WAL ${mb(m.wal)} (${(m.wal / N).toFixed(0)} B a notification), ` +
          `the log's tables ${mb(m.before.bytes)} before, ${mb(m.after.bytes)} after, ${m.after.dead} dead tuples; ` +
          `archive ${mb(m.archive)} (${(m.archive / N).toFixed(0)} B a notification, gzip NDJSON)`,
      );
    }
    runs.partition.push(byPartition);
    runs.rows.push(byRows);
    await database.close();
  }
  for (const [name, list] of Object.entries(runs)) {
    const seconds = list.map((m) => m.seconds).sort((a, b) => a - b);
    const wal = list.map((m) => m.wal).sort((a, b) => a - b);
    const left = list.map((m) => m.after.bytes).sort((a, b) => a - b);
    console.log(
      `${name === "partition" ? "by partition" : "by batched deletes"}, ${list.length} run(s), median (min-max): ` +
        `${seconds[Math.floor(seconds.length / 2)].toFixed(1)} (${seconds[0].toFixed(1)}-${seconds.at(-1).toFixed(1)}) s, ` +
        `WAL ${mb(wal[Math.floor(wal.length / 2)])} (${mb(wal[0])}-${mb(wal.at(-1))}), ` +
        `left in the tables ${mb(left[Math.floor(left.length / 2)])}`,
    );
  }
} finally {
  for (const fn of teardowns.reverse()) await fn();
}
