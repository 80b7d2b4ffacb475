import { type ChannelStatus, notificationStatus } from "@notify/core";
import { readNotifications } from "../lookup/records.js";
import type { Database, Sql } from "../pool.js";

/**
 * The dispatcher's side of outbound webhooks: it decides which notifications are completed and
 * hands each due delivery to the senders, one attempt at a time. It runs on one processor
 * instance (a lease); SKIP LOCKED keeps a second one, during a lease's hand-over, off the same rows.
 */

/** A delivery's next attempt, as the dispatcher publishes it for a sender. */
export interface DueDelivery {
  endpoint_id: string;
  event_id: number;
  /** The delivery's run (0, or one more for each replay) this attempt belongs to. */
  run: number;
  /** The attempt this message is for, from 1 within its run. */
  attempt: number;
  /**
   * JetStream's message id for this publish: endpoint, event, run, attempt and when the delivery last
   * changed, so a publish repeated after a crash (the row unchanged) is dropped as a duplicate,
   * while an attempt put back (a busy endpoint) is published anew within the duplicate window.
   */
  message_id: string;
}

/** The outcomes that end a notification: `notification.completed` is sent for these. */
const ENDED = new Set(["completed", "partially_failed", "failed", "suppressed", "canceled"]);

/**
 * Takes up to `limit` pending completion checks and writes `notification.completed` for each
 * notification whose every channel has an outcome now (once: the event's unique index), counts
 * each such notification that is a tallied broadcast's recipient in that broadcast's tally, and
 * writes `broadcast.completed` for the broadcasts that are done. Runs after the changes that
 * asked for the checks are committed, so the last channel to reach its outcome always finds the
 * others'. Answers how many checks it took.
 */
export async function checkCompletions(database: Database, limit: number): Promise<number> {
  return database.sql.begin(async (sql) => {
    const checks = await sql<Array<{ notification_id: string }>>`
      delete from webhook_completion_checks where notification_id in (
        select notification_id from webhook_completion_checks
        order by created_at limit ${limit} for update skip locked)
      returning notification_id`;
    const records = await readNotifications(
      { ...database, sql: sql as unknown as Sql },
      checks.map((c) => c.notification_id),
    );
    const ended: Array<{ notification_id: string; client_id: string; data: Record<string, unknown> }> = [];
    for (const record of records) {
      const statuses = Object.values(record.channels).map((c) => c.status as ChannelStatus);
      const status = notificationStatus(statuses, { fallbackPending: record.fallback_pending });
      if (!ENDED.has(status)) continue;
      const channels = Object.fromEntries(
        Object.entries(record.channels).map(([channel, c]) => [channel, { status: c.status, reason: c.reason }]),
      );
      const { notification_id, client_id, user_id, category } = record;
      ended.push({
        notification_id,
        client_id,
        data: { notification_id, client_id, user_id, category, status, channels },
      });
    }
    // The event is written for every check taken: a check is asked for only while an endpoint
    // wants it, or a broadcast's tally counts the notification (the event, owed to no endpoint
    // then, is what makes it counted once).
    const counted =
      ended.length === 0
        ? []
        : await sql<TallyDelta[]>`
          with inserted as (
            insert into webhook_events (client_id, type, notification_id, data)
            select e.client_id, 'notification.completed', e.notification_id, e.data
            from jsonb_to_recordset(${sql.json(ended as never)}) as e(notification_id text, client_id text, data jsonb)
            order by e.notification_id
            on conflict (notification_id) where type = 'notification.completed' do nothing
            returning notification_id, data->>'status' as status
          )
          select r.broadcast_id, count(*)::int as ended,
            (count(*) filter (where i.status = 'completed'))::int as completed,
            (count(*) filter (where i.status = 'partially_failed'))::int as partially_failed,
            (count(*) filter (where i.status = 'failed'))::int as failed,
            (count(*) filter (where i.status = 'suppressed'))::int as suppressed
          -- Each notification's recipient row looked up by its id (\`offset 0\`: a subquery kept as it
          -- is), which reaches its own partition (drizzle/0031); joined as a set, the recipients
          -- of every partition are hashed.
          from inserted i
          cross join lateral (select r.broadcast_id from broadcast_recipients r
            where r.notification_id = i.notification_id offset 0) r
          group by r.broadcast_id order by r.broadcast_id`;
    if (counted.length > 0) {
      // Locked in one order first: two dispatchers during a lease's hand-over never wait on each
      // other in a cycle.
      await sql`
        select 1 from webhook_broadcast_tallies where broadcast_id = any(${counted.map((c) => c.broadcast_id)}::text[])
        order by broadcast_id for update`;
      await sql`
        update webhook_broadcast_tallies t set ended = t.ended + c.ended, completed = t.completed + c.completed,
          partially_failed = t.partially_failed + c.partially_failed, failed = t.failed + c.failed,
          suppressed = t.suppressed + c.suppressed
        from jsonb_to_recordset(${sql.json(counted as never)}) as c(broadcast_id text, ended int, completed int,
          partially_failed int, failed int, suppressed int)
        where t.broadcast_id = c.broadcast_id and t.completed_at is null`;
    }
    await completeBroadcasts(
      sql as unknown as Sql,
      counted.map((c) => c.broadcast_id),
    );
    return checks.length;
  });
}

/** What one round of checks adds to a broadcast's tally. */
interface TallyDelta {
  broadcast_id: string;
  ended: number;
  completed: number;
  partially_failed: number;
  failed: number;
  suppressed: number;
}

interface TallyRow {
  broadcast_id: string;
  client_id: string;
  ended: string;
  completed: string;
  partially_failed: string;
  failed: string;
  suppressed: string;
  status: string;
  expanded: string;
  category: string;
}

/**
 * Writes `broadcast.completed` for each tallied broadcast, among those just counted and those
 * that just finished expanding, that is expanded (or cancelled) and has every recipient it
 * expanded counted. The tallies are locked first, so a count another dispatcher is committing
 * (during a lease's hand-over) is waited for and read, not missed. A finished broadcast still
 * waiting for recipients is looked at again when the last of them is counted.
 */
async function completeBroadcasts(sql: Sql, touched: readonly string[]): Promise<void> {
  const tallies = await sql<TallyRow[]>`
    select t.broadcast_id, t.client_id, t.ended, t.completed, t.partially_failed, t.failed, t.suppressed,
      b.status, b.expanded, b.category
    from webhook_broadcast_tallies t join broadcasts b on b.id = t.broadcast_id
    where (t.check_due or t.broadcast_id = any(${touched as string[]}::text[])) and t.completed_at is null
    order by t.broadcast_id
    for update of t`;
  const finished = tallies.filter((t) => t.status === "expanded" || t.status === "cancelled");
  if (finished.length === 0) return;
  const done = finished.filter((t) => Number(t.ended) >= Number(t.expanded));
  const events = done.map((t) => ({
    client_id: t.client_id,
    data: {
      broadcast_id: t.broadcast_id,
      client_id: t.client_id,
      category: t.category,
      status: t.status,
      recipients: Number(t.expanded),
      outcomes: {
        completed: Number(t.completed),
        partially_failed: Number(t.partially_failed),
        failed: Number(t.failed),
        suppressed: Number(t.suppressed),
        // The tally keeps no column of its own for them: every recipient counted in `ended` has
        // exactly one outcome, so the canceled ones are those the other counts leave.
        canceled:
          Number(t.ended) - Number(t.completed) - Number(t.partially_failed) - Number(t.failed) - Number(t.suppressed),
      },
    },
  }));
  if (events.length > 0) {
    await sql`
      insert into webhook_events (client_id, type, data)
      select e.client_id, 'broadcast.completed', e.data
      from jsonb_to_recordset(${sql.json(events as never)}) as e(client_id text, data jsonb)
      on conflict ((data->>'broadcast_id')) where type = 'broadcast.completed' do nothing`;
  }
  await sql`
    update webhook_broadcast_tallies set check_due = false,
      completed_at = case when broadcast_id = any(${done.map((t) => t.broadcast_id)}::text[]) then now() end
    where broadcast_id = any(${finished.map((t) => t.broadcast_id)}::text[])`;
}

/**
 * How long a published attempt may go unanswered before the dispatcher publishes the next one
 * (its message was lost, or its sender died mid-post): longer than a post's timeout.
 */
export const QUEUED_TIMEOUT_SECONDS = 300;

/** Attempts of one endpoint published and unanswered at once, unless the deployment says otherwise. */
export const DEFAULT_IN_FLIGHT = 32;

/** What a round of the dispatcher did. */
export interface DispatchRound {
  /** Attempts published. */
  published: number;
  /** Whether an endpoint has deliveries due that wait for its attempts in flight to be answered. */
  held: boolean;
}

/**
 * Hands due deliveries to `publish` (which resolves once JetStream has stored them) and marks
 * them queued, in one transaction that commits only after the publish: a crash in between leaves
 * them due, and their next publish carries the same message id. A queued delivery whose attempt
 * was never answered within QUEUED_TIMEOUT_SECONDS is due again, as its next attempt.
 *
 * An endpoint has at most `inFlight` attempts published and unanswered: the senders take what is
 * published at once or put it back, so an endpoint's backlog handed out in one go would go round
 * and round through Postgres and the stream instead of waiting here. The endpoints are served in
 * turn (each one's oldest, then each one's second…), so one endpoint's backlog never delays
 * another's first post.
 */
export async function dispatchDue(
  database: Database,
  limit: number,
  publish: (deliveries: DueDelivery[]) => Promise<void>,
  inFlight = DEFAULT_IN_FLIGHT,
): Promise<DispatchRound> {
  return database.sql.begin(async (sql) => {
    // Chosen first, then locked: the rows skipped for another endpoint's turn stay unlocked.
    const candidates = await sql<Array<{ endpoint_id: string | null; event_id: string | null }>>`
      with lanes as (
        select e.id, greatest(0, ${inFlight}::int - (
          select count(*) from webhook_deliveries q
          where q.endpoint_id = e.id and q.status = 'queued' and q.next_attempt_at > now()))::int as room
        from webhook_endpoints e
      ), picked as materialized (
        select l.id as endpoint_id, d.event_id, d.next_attempt_at, d.turn, l.room
        from lanes l
        cross join lateral (
          select x.event_id, x.next_attempt_at, row_number() over (order by x.next_attempt_at) as turn
          from (select event_id, next_attempt_at from webhook_deliveries
                where endpoint_id = l.id and status in ('waiting', 'queued') and next_attempt_at <= now()
                order by next_attempt_at limit l.room + 1) x) d
      )
      (select endpoint_id, event_id from picked where turn <= room order by turn, next_attempt_at limit ${limit})
      union all
      (select null, null from picked where turn > room limit 1)`;
    const chosen = candidates.filter((c) => c.endpoint_id !== null) as Array<{ endpoint_id: string; event_id: string }>;
    const held = chosen.length < candidates.length;
    if (chosen.length === 0) return { published: 0, held };
    const due = await sql<
      Array<{ endpoint_id: string; event_id: string; run: number; attempts: number; updated_at: Date }>
    >`
      select d.endpoint_id, d.event_id, d.run, d.attempts, d.updated_at
      from webhook_deliveries d
      join unnest(${chosen.map((c) => c.endpoint_id)}::text[], ${chosen.map((c) => c.event_id)}::bigint[])
        as u(endpoint_id, event_id) on d.endpoint_id = u.endpoint_id and d.event_id = u.event_id
      where d.status in ('waiting', 'queued') and d.next_attempt_at <= now()
      order by d.endpoint_id, d.event_id
      for update of d skip locked`;
    if (due.length === 0) return { published: 0, held };
    const deliveries = due.map((d) => ({
      endpoint_id: d.endpoint_id,
      event_id: Number(d.event_id),
      run: d.run,
      attempt: d.attempts + 1,
      message_id: `${d.endpoint_id}:${d.event_id}:${d.run}:${d.attempts + 1}:${d.updated_at.getTime()}`,
    }));
    await publish(deliveries);
    await sql`
      update webhook_deliveries d set status = 'queued',
        next_attempt_at = now() + make_interval(secs => ${QUEUED_TIMEOUT_SECONDS}), updated_at = now()
      from (select * from unnest(${due.map((d) => d.endpoint_id)}::text[],
                                 ${due.map((d) => d.event_id)}::bigint[]) as u(endpoint_id, event_id)) u
      where d.endpoint_id = u.endpoint_id and d.event_id = u.event_id`;
    return { published: deliveries.length, held };
  });
}
