import { randomUUID } from "node:crypto";
import { type Channel, type ChannelStatus, canTransition } from "@notify/core";
import { freshDatabase } from "@notify/testing";
import postgres from "postgres";
import t from "tap";
import {
  applyPendingReceipts,
  createDb,
  type Database,
  endFallback,
  findWaitingChannels,
  moveStatus,
  type Receipt,
  recordReceipts,
  releaseDeferrals,
  settleInAppFromInbox,
  startFallbackWait,
  storeInboxItem,
  takeFallbackStep,
  touchWaitingChannel,
} from "../src/index.js";

// Every writer of a notification's rows locks them in one order (src/lock-order.ts), so the
// workers' status moves, receipts, the processor's fallback steps and deferral releases and the
// reconciler, all at the same notifications' rows at once, never deadlock. Each round routes
// fresh notifications and lets every writer at them together, each as a process of its own (a
// pool of its own, so its batches are its own), each in an order of its own.

const { url } = await freshDatabase(t);

// A deadlock is found after deadlock_timeout (1 s by default) of waiting; found sooner, a
// round that meets some costs less. Only a superuser may set it: elsewhere the default stays.
const admin = postgres(url, { max: 1, onnotice: () => {} });
t.teardown(() => admin.end());
const [{ name } = { name: "" }] = await admin<{ name: string }[]>`select current_database() as name`;
await admin.unsafe(`alter database "${name}" set deadlock_timeout = '100ms'`).catch(() => undefined);

const ROUNDS = 30;
const PER_ROUND = 24;
const PROVIDER: Record<Channel, string> = { email: "sendgrid", sms: "plivo", push: "apns", in_app: "inapp" };
/** What routing wrote; sms comes later, by the fallback step from email. */
const ROUTED: ReadonlyArray<[Channel, ChannelStatus]> = [
  ["email", "pending"],
  ["push", "deferred"],
  ["in_app", "unsettled"],
];

const processes = Array.from({ length: 5 }, (_, i) => {
  const db = createDb({ url, max: 3, applicationName: `lock-order-${i}` });
  t.teardown(() => db.close());
  return db;
});
const [workerA, workerB, receipts, processor, reconciler] = processes as [
  Database,
  Database,
  Database,
  Database,
  Database,
];
const { sql } = processor;

function shuffled<T>(items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

const providerId = (id: string, channel: Channel) => `${PROVIDER[channel]}-${id}-${channel}`;

/**
 * Notifications as routing leaves them: email pending, push deferred with its timer due, in-app
 * unsettled with its inbox item stored (a worker gone mid-store), and a fallback chain watching
 * email whose next step is sms.
 */
async function route(): Promise<string[]> {
  const ids = Array.from({ length: PER_ROUND }, () => randomUUID());
  await sql`
    insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    select id, 'c', 'u', 'account', 'welcome', 'transactional', '{}', id, 'h', 0 from unnest(${ids}::text[]) id`;
  await sql`
    insert into notification_channels (notification_id, channel, status, next_attempt_at)
    select id, r.channel, r.status, case r.status when 'deferred' then now() - interval '1 second' end
    from unnest(${ids}::text[]) id
    cross join unnest(${ROUTED.map(([c]) => c)}::text[], ${ROUTED.map(([, s]) => s)}::text[]) as r(channel, status)`;
  await sql`
    insert into deferred_notifications (notification_id, user_id, due_at)
    select id, 'u', now() - interval '1 second' from unnest(${ids}::text[]) id`;
  await sql`
    insert into notification_fallbacks (notification_id, steps, watching)
    select id, ${sql.json([{ channel: "sms", when: ["failed", "unconfirmed"] }] as never)}, 'email'
    from unnest(${ids}::text[]) id`;
  for (const id of ids) {
    await storeInboxItem(sql, { userId: "u", notificationId: id, category: "account", title: null, body: "hi" });
  }
  return ids;
}

/** A worker process: each channel retried once, then delivered (or failed), every send at once. */
async function work(db: Database, ids: string[], channels: readonly Channel[]): Promise<void> {
  const refs = shuffled(ids.flatMap((id) => channels.map((channel) => ({ notification_id: id, channel }))));
  await Promise.all(
    refs.map(async (ref, i) => {
      const provider = PROVIDER[ref.channel];
      await moveStatus(db.sql, ref, "retrying", {
        reason: "timeout",
        attempts: 1,
        nextAttemptAt: new Date(),
        attempt: { attempt: 1, outcome: "retry", provider, providerId: null, error: "timeout" },
      });
      const to: ChannelStatus = i % 5 === 0 ? "failed" : "delivered";
      const id = providerId(ref.notification_id, ref.channel);
      await moveStatus(db.sql, ref, to, {
        provider,
        providerId: id,
        attempts: 2,
        attempt: { attempt: 2, outcome: to, provider, providerId: id, error: null },
      });
    }),
  );
}

/**
 * The receipts process: a delivery and a bounce of every email and SMS, in posts of their own,
 * many before their send is recorded (bound by the channel their payload names, or left for the
 * pending sweep), and two sweeps.
 */
async function receive(db: Database, ids: string[]): Promise<void> {
  const events: Receipt[] = shuffled(
    ids.flatMap((id) =>
      (["email", "sms"] as const).flatMap((channel) =>
        (["delivered", "bounced"] as const).map((status) => ({
          provider: PROVIDER[channel],
          eventId: randomUUID(),
          providerId: providerId(id, channel),
          status,
          reason: status === "bounced" ? "mailbox full" : null,
          payload: { notification_id: id, channel },
        })),
      ),
    ),
  );
  const third = Math.ceil(events.length / 3);
  await Promise.all([
    ...[0, 1, 2].map((i) => recordReceipts(db.sql, events.slice(i * third, (i + 1) * third))),
    applyPendingReceipts(db.sql),
    applyPendingReceipts(db.sql),
  ]);
  await applyPendingReceipts(db.sql);
}

/** The processor: fallback steps to sms (queued, suppressed or deferred), and the release of push's deferral. */
async function runProcessor(db: Database, ids: string[]): Promise<void> {
  const steps = async () => {
    for (const [i, id] of shuffled(ids).entries()) {
      const status = (["pending", "suppressed", "deferred"] as const)[i % 3] ?? "pending";
      await takeFallbackStep(db, {
        notificationId: id,
        userId: "u",
        step: 0,
        from: "email",
        because: "failed",
        next: {
          channel: "sms",
          status,
          reason: status === "pending" ? null : "quiet hours",
          nextAttemptAt: status === "deferred" ? new Date(Date.now() - 1000) : null,
        },
      });
    }
  };
  const waits = async () => {
    for (const id of shuffled(ids)) {
      await startFallbackWait(db, id, 1, new Date(Date.now() + 60_000));
      await endFallback(db, id, "u", 1);
    }
  };
  const release = (due: string[]) =>
    releaseDeferrals(db, due, new Date(), async (ops) => {
      const settled = shuffled([...ops.locked])
        .filter((id) => ops.isDeferred(id, "push"))
        .map((id) => ({
          notificationId: id,
          channel: "push" as const,
          status: "suppressed" as const,
          reason: "opted out",
          nextAttemptAt: null,
        }));
      await ops.settleChannels(settled);
      await ops.finish([...ops.locked]);
    });
  const half = shuffled(ids);
  await Promise.all([steps(), waits(), release(half.slice(0, PER_ROUND / 2)), release(half.slice(PER_ROUND / 2))]);
}

/** The reconciler: stalled channels touched, in-app channels settled from the inbox. */
async function reconcile(db: Database): Promise<void> {
  const later = new Date(Date.now() + 60_000);
  const waiting = await findWaitingChannels(db, { before: later, limit: 500 });
  const touch = async () => {
    for (const w of shuffled(waiting)) await touchWaitingChannel(db, w);
  };
  await Promise.all([touch(), settleInAppFromInbox(db, later, 500)]);
}

t.test("workers, receipts, processor and reconciler at the same rows never deadlock", async (t) => {
  const failures: unknown[] = [];
  const run = (p: Promise<unknown>) =>
    p.catch((error: unknown) => {
      failures.push(error);
    });
  for (let round = 0; round < ROUNDS; round++) {
    const ids = await route();
    await Promise.all([
      run(work(workerA, ids, ["email", "sms"])),
      run(work(workerB, ids, ["push", "in_app", "sms"])),
      run(receive(receipts, ids)),
      run(runProcessor(processor, ids)),
      run(reconcile(reconciler)),
    ]);
  }
  const deadlocks = failures.filter((e) => (e as { code?: string }).code === "40P01");
  t.equal(deadlocks.length, 0, "no statement failed with deadlock detected (40P01)");
  t.same(failures.filter((e) => !deadlocks.includes(e)).map(String), [], "nor with anything else");

  // A channel's status moved forward only, every move logged: its history, from what routing
  // (or the fallback step) wrote, goes forward at each step and ends at its status.
  const channels = await sql<{ channel: Channel; status: ChannelStatus; events: ChannelStatus[] }[]>`
    select c.channel, c.status, array(select e.status from channel_status_events e
      where e.notification_id = c.notification_id and e.channel = c.channel order by e.id) as events
    from notification_channels c`;
  const broken = channels.filter(({ channel, status, events }) => {
    const path = [ROUTED.find(([c]) => c === channel)?.[1] ?? "pending", ...events];
    const forward = path.every((s, i) => i === 0 || canTransition(path[i - 1] as ChannelStatus, s));
    return !forward || (events.length > 0 && events.at(-1) !== status);
  });
  t.same(broken, [], "every channel's history goes forward and ends at its status");
  t.ok(channels.filter((c) => c.events.length > 0).length > ROUNDS * PER_ROUND * 3, "the writers moved the channels");

  // PostgreSQL's own count, with the deadlocks a caller retried (receipts retry a statement):
  // a backend adds its counts as it exits, so once the writers' connections are gone.
  for (const db of processes) await db.close();
  for (let i = 0; i < 50; i++) {
    const [left] = await admin<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity
      where datname = current_database() and application_name like 'lock-order-%'`;
    if (left?.n === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const [stats] = await admin<{ deadlocks: number }[]>`
    select deadlocks::int from pg_stat_database where datname = current_database()`;
  t.equal(stats?.deadlocks, 0, "PostgreSQL detected no deadlock in the database");
});
