import { recipientOf } from "@notify/core";
import type { Database } from "../pool.js";
import { QUEUED_TIMEOUT_SECONDS } from "./dispatch.js";

/**
 * The sender's side of outbound webhooks: it claims one attempt of a delivery, and records what
 * the endpoint answered and what follows (delivered, the next attempt's time, dead), with the
 * endpoint's failure record.
 */

/** What a sender needs to post one attempt. */
export interface ClaimedDelivery {
  endpointId: string;
  clientId: string;
  url: string;
  /** The secrets to sign with: the current one, and the previous one during a rotation's grace. */
  secrets: string[];
  event: { id: number; type: string; occurredAt: Date; data: Record<string, unknown> };
}

/**
 * The event's data with what the endpoint asked for beyond it (`include`), read when the post is
 * made: the notification's template data, and the user's address on the event's channel.
 */
const withIncludes = (row: ClaimRow): Record<string, unknown> => {
  if (row.notification_data === null && row.contacts === null) return row.data;
  const data = { ...row.data };
  if (row.notification_data !== null) data.notification_data = row.notification_data;
  if (row.contacts !== null) {
    const recipient = recipientOf(row.data.channel, row.contacts);
    if (Object.keys(recipient).length > 0) data.recipient = recipient;
  }
  return data;
};

interface ClaimRow {
  client_id: string;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_live: boolean;
  endpoint_status: string;
  type: string;
  occurred_at: Date;
  data: Record<string, unknown>;
  notification_data: Record<string, unknown> | null;
  contacts: { email: string | null; phone: string | null } | null;
}

/**
 * Claims attempt `attempt` of a delivery's run `run`: only while no attempt at or after this one
 * was claimed in that run, and no replay started a later run, so a repeated message (or one of a
 * run a replay ended) claims nothing. The delivery may still read `waiting`: the
 * dispatcher publishes before it commits `queued` (a crash in between loses no attempt), and a
 * claim made meanwhile waits for that commit on the row's lock. A message JetStream delivers
 * again (`redelivered`: its sender stopped telling the server it was working on it, so it died
 * or lost its connection) claims its own attempt again while it is still in flight, so a post
 * cut by a crash is made at once, not after the publish timeout (the receiver may then see it
 * twice, with the same webhook-id). The next publish is pushed back meanwhile (dispatch.ts
 * QUEUED_TIMEOUT_SECONDS), in case this sender dies mid-post. `disabled` when the endpoint was
 * disabled since: the delivery is then dead, not posted.
 */
export async function claimDelivery(
  database: Database,
  delivery: { endpointId: string; eventId: number; run: number; attempt: number; redelivered?: boolean },
): Promise<ClaimedDelivery | "disabled" | undefined> {
  const { sql } = database;
  const [row] = await sql<ClaimRow[]>`
    with claimed as (
      update webhook_deliveries set status = 'queued', attempts = ${delivery.attempt}, updated_at = now(),
        next_attempt_at = now() + make_interval(secs => ${QUEUED_TIMEOUT_SECONDS})
      where endpoint_id = ${delivery.endpointId} and event_id = ${delivery.eventId} and run = ${delivery.run}
        and ((status in ('waiting', 'queued') and attempts = ${delivery.attempt - 1})
          ${delivery.redelivered === true ? sql`or (status = 'queued' and attempts = ${delivery.attempt})` : sql``})
      returning endpoint_id, event_id)
    select e.client_id, e.url, e.secret, e.previous_secret,
           coalesce(e.previous_secret_expires_at > now(), false) as previous_live,
           e.status as endpoint_status, ev.type, ev.occurred_at, ev.data,
           case when ev.notification_id is not null and 'notification_data' = any(e.include) then
             (select n.data from notifications n where n.id = ev.notification_id) end as notification_data,
           case when ev.notification_id is not null and 'recipient' = any(e.include) then
             (select jsonb_build_object('email', u.email, 'phone', u.phone)
              from notifications n left join user_contacts u on u.user_id = n.user_id
              where n.id = ev.notification_id) end as contacts
    from claimed c
    join webhook_endpoints e on e.id = c.endpoint_id
    join webhook_events ev on ev.id = c.event_id`;
  if (row === undefined) return undefined;
  if (row.endpoint_status !== "enabled") {
    await sql`
      update webhook_deliveries set status = 'dead', last_error = 'the endpoint is disabled', next_attempt_at = null,
        updated_at = now()
      where endpoint_id = ${delivery.endpointId} and event_id = ${delivery.eventId} and status = 'queued'
        and run = ${delivery.run} and attempts = ${delivery.attempt}`;
    return "disabled";
  }
  return {
    endpointId: delivery.endpointId,
    clientId: row.client_id,
    url: row.url,
    secrets: row.previous_live && row.previous_secret !== null ? [row.secret, row.previous_secret] : [row.secret],
    event: { id: delivery.eventId, type: row.type, occurredAt: row.occurred_at, data: withIncludes(row) },
  };
}

export interface AttemptRecord {
  endpointId: string;
  eventId: number;
  /** The delivery's run the attempt belongs to (0, or one more for each replay). */
  run: number;
  attempt: number;
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  /** What follows: delivered, the next attempt's time, or dead. */
  next: { kind: "delivered" } | { kind: "retry"; at: Date } | { kind: "dead"; reason: string };
  /**
   * An endpoint failing since before this instant is disabled by this failure, and its deliveries
   * still owed become dead letters.
   */
  disableFailingSince: Date;
}

/**
 * Records an attempt and what follows it, with the endpoint's failure record, in one statement
 * (a sender records every post: a transaction of several round trips held a connection of the
 * senders' small pool for each); answers whether it disabled the endpoint (it had failed every
 * attempt for too long). What the endpoint was still owed then becomes dead letters, in a second
 * statement: should that one never run, each of those deliveries dies at its claim instead.
 */
export async function recordWebhookAttempt(database: Database, record: AttemptRecord): Promise<{ disabled: boolean }> {
  const { sql } = database;
  const { next } = record;
  const status = next.kind === "delivered" ? "delivered" : next.kind === "retry" ? "waiting" : "dead";
  const at = next.kind === "retry" ? next.at : null;
  const reason = next.kind === "dead" ? next.reason : record.error;
  const since = record.disableFailingSince;
  const endpoint =
    next.kind === "delivered"
      ? sql`update webhook_endpoints set failing_since = null
          where id = ${record.endpointId} and failing_since is not null
          returning false as disabled`
      : sql`update webhook_endpoints set
          failing_since = coalesce(failing_since, now()),
          status = case when failing_since <= ${since} then 'disabled' else status end,
          disabled_reason = case when failing_since <= ${since} then 'failing' else disabled_reason end,
          disabled_at = case when failing_since <= ${since} then now() else disabled_at end
        where id = ${record.endpointId}
        returning status = 'disabled' and disabled_reason = 'failing' and disabled_at = now() as disabled`;
  const [row] = await sql<Array<{ disabled: boolean }>>`
    with attempt as (
      insert into webhook_attempts (endpoint_id, event_id, run, attempt, status_code, latency_ms, error)
      values (${record.endpointId}, ${record.eventId}, ${record.run}, ${record.attempt}, ${record.statusCode},
        ${record.latencyMs}, ${record.error})
      on conflict do nothing
    ), delivery as (
      update webhook_deliveries set status = ${status}, next_attempt_at = ${at}, last_error = ${reason}, updated_at = now()
      where endpoint_id = ${record.endpointId} and event_id = ${record.eventId} and run = ${record.run}
        and attempts = ${record.attempt} and status = 'queued'
    ), endpoint as (${endpoint})
    select coalesce((select disabled from endpoint), false) as disabled`;
  const disabled = row?.disabled === true;
  if (disabled) {
    await sql`
      update webhook_deliveries set status = 'dead', next_attempt_at = null, updated_at = now(),
        last_error = 'the endpoint was disabled after failing for too long'
      where endpoint_id = ${record.endpointId} and status in ('waiting', 'queued')`;
  }
  return { disabled };
}

/**
 * Puts a queued delivery back, due after `delayMs`, without spending an attempt: its endpoint has
 * as many posts in flight as it may, and holding the message would hold a sender's slot that
 * another endpoint's events could use.
 */
export async function deferDelivery(
  database: Database,
  delivery: { endpointId: string; eventId: number; run: number; attempt: number },
  delayMs: number,
): Promise<void> {
  await database.sql`
    update webhook_deliveries set status = 'waiting', updated_at = now(),
      next_attempt_at = now() + make_interval(secs => ${delayMs / 1000})
    where endpoint_id = ${delivery.endpointId} and event_id = ${delivery.eventId} and run = ${delivery.run}
      and status in ('waiting', 'queued') and attempts = ${delivery.attempt - 1}`;
}
