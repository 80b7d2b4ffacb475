import { type ChannelStatus, notificationStatus } from "@notify/core";
import { readNotification } from "../lookup/records.js";
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
  /** The attempt this message is for, from 1. */
  attempt: number;
  /**
   * JetStream's message id for this publish: endpoint, event, attempt and when the delivery last
   * changed, so a publish repeated after a crash (the row unchanged) is dropped as a duplicate,
   * while an attempt put back (a busy endpoint) is published anew within the duplicate window.
   */
  message_id: string;
}

/** The outcomes that end a notification: `notification.completed` is sent for these. */
const ENDED = new Set(["completed", "partially_failed", "failed", "suppressed"]);

/**
 * Takes up to `limit` pending completion checks and writes `notification.completed` for each
 * notification whose every channel has an outcome now (once: the event's unique index). Runs
 * after the changes that asked for the check are committed, so the last channel to reach its
 * outcome always finds the others' outcomes. Answers how many checks it took.
 */
export async function checkCompletions(database: Database, limit: number): Promise<number> {
  return database.sql.begin(async (sql) => {
    const checks = await sql<Array<{ notification_id: string }>>`
      delete from webhook_completion_checks where notification_id in (
        select notification_id from webhook_completion_checks
        order by created_at limit ${limit} for update skip locked)
      returning notification_id`;
    for (const { notification_id } of checks) {
      const record = await readNotification({ ...database, sql: sql as unknown as Sql }, null, notification_id);
      if (record === null) continue;
      const statuses = Object.values(record.channels).map((c) => c.status as ChannelStatus);
      const status = notificationStatus(statuses, { fallbackPending: record.fallback_pending });
      if (!ENDED.has(status)) continue;
      const channels = Object.fromEntries(
        Object.entries(record.channels).map(([channel, c]) => [channel, { status: c.status, reason: c.reason }]),
      );
      await sql`
        insert into webhook_events (client_id, type, notification_id, data)
        select ${record.client_id}::text, 'notification.completed', ${notification_id}::text, ${sql.json({
          notification_id,
          client_id: record.client_id,
          user_id: record.user_id,
          category: record.category,
          status,
          channels,
        })}
        where webhook_wanted(${record.client_id}, 'notification.completed')
        on conflict (notification_id) where type = 'notification.completed' do nothing`;
    }
    return checks.length;
  });
}

/**
 * How long a published attempt may go unanswered before the dispatcher publishes the next one
 * (its message was lost, or its sender died mid-post): longer than a post's timeout.
 */
export const QUEUED_TIMEOUT_SECONDS = 300;

/**
 * Hands due deliveries to `publish` (which resolves once JetStream has stored them) and marks
 * them queued, in one transaction that commits only after the publish: a crash in between leaves
 * them due, and their next publish carries the same message id. A queued delivery whose attempt
 * was never answered within QUEUED_TIMEOUT_SECONDS is due again, as its next attempt.
 */
export async function dispatchDue(
  database: Database,
  limit: number,
  publish: (deliveries: DueDelivery[]) => Promise<void>,
): Promise<number> {
  return database.sql.begin(async (sql) => {
    const due = await sql<Array<{ endpoint_id: string; event_id: string; attempts: number; updated_at: Date }>>`
      select endpoint_id, event_id, attempts, updated_at from webhook_deliveries
      where status in ('waiting', 'queued') and next_attempt_at <= now()
      order by next_attempt_at limit ${limit} for update skip locked`;
    if (due.length === 0) return 0;
    const deliveries = due.map((d) => ({
      endpoint_id: d.endpoint_id,
      event_id: Number(d.event_id),
      attempt: d.attempts + 1,
      message_id: `${d.endpoint_id}:${d.event_id}:${d.attempts + 1}:${d.updated_at.getTime()}`,
    }));
    await publish(deliveries);
    await sql`
      update webhook_deliveries d set status = 'queued',
        next_attempt_at = now() + make_interval(secs => ${QUEUED_TIMEOUT_SECONDS}), updated_at = now()
      from (select * from unnest(${due.map((d) => d.endpoint_id)}::text[],
                                 ${due.map((d) => d.event_id)}::bigint[]) as u(endpoint_id, event_id)) u
      where d.endpoint_id = u.endpoint_id and d.event_id = u.event_id`;
    return deliveries.length;
  });
}
