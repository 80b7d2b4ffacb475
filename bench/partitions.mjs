// npm run bench:partitions: what the statements every email passes through cost PostgreSQL as the
// log keeps more days. The log has a partition a day (LOG_PARTITION_HOURS), a week made ahead, and
// keeps RETENTION_DAYS (90 by default) behind, so a service that has run for three months has
// about a hundred partitions of each log table. For each number of days kept (BENCH_DAYS_KEPT,
// "0,30,90"), a fresh migrated database is given those days' partitions, and each statement runs
// as a service runs it (its own pool of one connection, prepared, on its generic plan once warm),
// one call a statement and eight (one batch, or one post of eight receipts): the CPU the server's
// backend spent per statement, read from /proc, as the median and min-max of BENCH_REPEAT (5)
// runs of BENCH_STATEMENTS (500) statements each. The statements: routing (recordRoutedChannels),
// the worker's read of its channel (loadChannel, with the address it sends to), its status move
// with the attempt line (moveStatus), and a post of receipts naming their notifications
// (recordReceipts). PostgreSQL must run on this machine (TEST_DATABASE_URL).
import { readFileSync } from "node:fs";
import { newId } from "@notify/core";
import { createDb, loadChannel, moveStatus, recordReceipts, recordRoutedChannels } from "@notify/db";
import { freshDatabase } from "@notify/testing";
import postgres from "postgres";

const DAYS_KEPT = (process.env.BENCH_DAYS_KEPT ?? "0,30,90").split(",").map(Number);
const REPEAT = Number(process.env.BENCH_REPEAT ?? 5);
const STATEMENTS = Number(process.env.BENCH_STATEMENTS ?? 500);
const WARM = 20;

const teardowns = [];
const t = { teardown: (fn) => teardowns.push(fn) };

/** The CPU (µs) a backend has spent, from /proc. */
function backendCpu(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * (1e6 / 100);
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** The statements, each a batch of `width` calls on notifications made by `make`. */
const STEPS = [
  {
    name: "routing",
    channels: false,
    run: (db, ids) =>
      Promise.all(
        ids.map((id) =>
          recordRoutedChannels(db, {
            notificationId: id,
            clientId: "c",
            userId: `u-${id}`,
            priority: "transactional",
            channels: [{ channel: "email", status: "pending", reason: null, nextAttemptAt: null }],
            deferredUntil: null,
            cap: null,
          }),
        ),
      ),
  },
  {
    name: "the worker's read",
    channels: true,
    run: (db, ids) =>
      Promise.all(
        ids.map((id) =>
          loadChannel(db.sql, {
            notification_id: id,
            channel: "email",
            user_id: `u-${id}`,
            address: `${id}@example.com`,
          }),
        ),
      ),
  },
  {
    name: "the worker's status move",
    channels: true,
    run: (db, ids) =>
      Promise.all(
        ids.map((id) =>
          moveStatus(db.sql, { notification_id: id, channel: "email", user_id: `u-${id}` }, "delivered", {
            provider: "sendgrid",
            providerId: `sg-${id}`,
            attempts: 1,
            attempt: { attempt: 1, outcome: "accepted", provider: "sendgrid", providerId: `sg-${id}`, error: null },
          }),
        ),
      ),
  },
  {
    name: "a post of receipts",
    channels: true,
    sent: true,
    run: (db, ids) =>
      recordReceipts(
        db.sql,
        ids.map((id) => ({
          provider: "sendgrid",
          eventId: `ev-${id}`,
          providerId: `sg-${id}`,
          status: "delivered",
          reason: null,
          payload: { event: "delivered", notification_id: id, channel: "email" },
        })),
      ),
  },
];

/** Notifications of now, in today's partition; with their email channel, sent when `sent`. */
async function make(sql, count, { channels, sent }) {
  const ids = Array.from({ length: count }, () => newId());
  await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key,
      request_hash, partition)
    select id, 'c', 'u-' || id, 'account', 'welcome', 'transactional', '{}', id, 'h', 0 from unnest(${ids}::text[]) id`;
  if (channels)
    await sql`insert into notification_channels (notification_id, channel, status, provider, provider_id, user_id)
      select id, 'email', ${sent ? "delivered" : "pending"}, ${sent ? "sendgrid" : null}, ${sent ? "sg-" : null} || id,
        'u-' || id
      from unnest(${ids}::text[]) id`;
  return ids;
}

const results = [];
try {
  for (const days of DAYS_KEPT) {
    const { url } = await freshDatabase(t);
    // Making a hundred days of partitions takes longer than the pools' statement timeout.
    const admin = { sql: postgres(url, { max: 1, onnotice: () => {}, connection: { statement_timeout: 0 } }) };
    teardowns.push(() => admin.sql.end());
    // The log as a service that has kept `days` days has it: a partition a day, a week ahead.
    for (const { suffix } of await admin.sql`select suffix from notify_log_partitions where not is_default`) {
      await admin.sql`select notify_log_detach(${suffix})`;
      await admin.sql`select notify_log_drop(${suffix})`;
    }
    await admin.sql`select notify_log_extend(now() + interval '7 days', interval '1 day',
      now() - ${days}::int * interval '1 day')`;
    const [{ partitions }] = await admin.sql`select count(*)::int as partitions from notify_log_partitions`;
    for (const step of STEPS) {
      for (const width of [1, 8]) {
        const runs = [];
        for (let r = 0; r < REPEAT; r++) {
          // A pool of its own, as a service process has: its prepared statements start afresh.
          const db = createDb({ url, max: 1 });
          const [{ pid }] = await db.sql`select pg_backend_pid() as pid`;
          const ids = await make(admin.sql, (WARM + STATEMENTS) * width, step);
          const batch = (i) => ids.slice(i * width, (i + 1) * width);
          for (let i = 0; i < WARM; i++) await step.run(db, batch(i));
          const before = backendCpu(pid);
          for (let i = WARM; i < WARM + STATEMENTS; i++) await step.run(db, batch(i));
          runs.push((backendCpu(pid) - before) / STATEMENTS);
          await db.close();
        }
        const row = {
          days,
          partitions,
          statement: step.name,
          width,
          median: median(runs),
          min: Math.min(...runs),
          max: Math.max(...runs),
        };
        results.push(row);
        console.log(
          `${days} days kept (${partitions} partitions), ${step.name}, ${width} a statement: ${row.median.toFixed(0)} (${row.min.toFixed(0)}-${row.max.toFixed(0)}) µs of the server's CPU a statement`,
        );
      }
    }
  }
  console.log(`JSON ${JSON.stringify(results)}`);
} finally {
  for (const fn of teardowns.reverse()) await fn();
}
