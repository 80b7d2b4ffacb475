import { webhookMessageId } from "@notify/core";
import type { Database } from "../pool.js";

/**
 * What a client (or the operator) reads of and does to an endpoint's deliveries: its attempts,
 * its dead letters, their replay, a test event, and its figures. Every function is given the
 * endpoint's owner, or null for the operator's routes, and reaches no other client's endpoint.
 */

export interface WebhookAttemptView {
  event_id: string;
  event_type: string;
  attempt: number;
  status_code: number | null;
  latency_ms: number;
  error: string | null;
  at: string;
}

const owned = (database: Database, clientId: string | null, endpointId: string) =>
  clientId === null
    ? database.sql`e.id = ${endpointId}`
    : database.sql`e.id = ${endpointId} and e.client_id = ${clientId}`;

/** Whether the owner (null: any client) has this endpoint. */
async function hasEndpoint(database: Database, clientId: string | null, endpointId: string): Promise<boolean> {
  const rows = await database.sql`select e.id from webhook_endpoints e where ${owned(database, clientId, endpointId)}`;
  return rows.length > 0;
}

/** The endpoint's latest attempts, newest first; undefined when the owner has no such endpoint. */
export async function listWebhookAttempts(
  database: Database,
  clientId: string | null,
  endpointId: string,
  limit: number,
): Promise<WebhookAttemptView[] | undefined> {
  if (!(await hasEndpoint(database, clientId, endpointId))) return undefined;
  const { sql } = database;
  const rows = await sql<
    Array<{
      event_id: string;
      type: string;
      attempt: number;
      status_code: number | null;
      latency_ms: number;
      error: string | null;
      at: Date;
    }>
  >`
    select a.event_id, ev.type, a.attempt, a.status_code, a.latency_ms, a.error, a.at
    from webhook_attempts a join webhook_events ev on ev.id = a.event_id
    where a.endpoint_id = ${endpointId}
    order by a.at desc, a.event_id desc, a.attempt desc limit ${limit}`;
  return rows.map((r) => ({
    event_id: webhookMessageId(r.event_id),
    event_type: r.type,
    attempt: r.attempt,
    status_code: r.status_code,
    latency_ms: r.latency_ms,
    error: r.error,
    at: r.at.toISOString(),
  }));
}

export interface DeadDeliveryView {
  event_id: string;
  event_type: string;
  attempts: number;
  last_error: string | null;
  occurred_at: string;
  died_at: string;
}

/** The endpoint's dead letters, newest first; undefined when the owner has no such endpoint. */
export async function listDeadDeliveries(
  database: Database,
  clientId: string | null,
  endpointId: string,
  limit: number,
): Promise<DeadDeliveryView[] | undefined> {
  if (!(await hasEndpoint(database, clientId, endpointId))) return undefined;
  const { sql } = database;
  const rows = await sql<
    Array<{
      event_id: string;
      type: string;
      attempts: number;
      last_error: string | null;
      occurred_at: Date;
      updated_at: Date;
    }>
  >`
    select d.event_id, ev.type, d.attempts, d.last_error, ev.occurred_at, d.updated_at
    from webhook_deliveries d join webhook_events ev on ev.id = d.event_id
    where d.endpoint_id = ${endpointId} and d.status = 'dead'
    order by d.updated_at desc, d.event_id desc limit ${limit}`;
  return rows.map((r) => ({
    event_id: webhookMessageId(r.event_id),
    event_type: r.type,
    attempts: r.attempts,
    last_error: r.last_error,
    occurred_at: r.occurred_at.toISOString(),
    died_at: r.updated_at.toISOString(),
  }));
}

export type ReplaySelection = { since: Date; until: Date } | { eventIds: number[] };

/**
 * Owes the endpoint again the events selected (its client's, of the types it wants, ping
 * excepted), whatever became of them before: each is posted once more, as a new run of attempts
 * with its own webhook-id unchanged. Answers how many, or undefined when the owner has no such
 * endpoint.
 */
export async function replayWebhookEvents(
  database: Database,
  clientId: string | null,
  endpointId: string,
  selection: ReplaySelection,
): Promise<number | undefined> {
  const { sql } = database;
  return sql.begin(async (tx) => {
    const [endpoint] = await tx<Array<{ client_id: string; event_types: string[] | null }>>`
      select e.client_id, e.event_types from webhook_endpoints e
      where ${clientId === null ? tx`e.id = ${endpointId}` : tx`e.id = ${endpointId} and e.client_id = ${clientId}`}
      for update`;
    if (endpoint === undefined) return undefined;
    const chosen =
      "eventIds" in selection
        ? tx`ev.id = any(${selection.eventIds}::bigint[])`
        : tx`ev.occurred_at >= ${selection.since} and ev.occurred_at < ${selection.until}`;
    const rows = await tx`
      insert into webhook_deliveries (endpoint_id, event_id, status, attempts, next_attempt_at)
      select ${endpointId}::text, ev.id, 'waiting', 0, now() from webhook_events ev
      where ev.client_id = ${endpoint.client_id} and ev.type <> 'ping' and ${chosen}
        and (${endpoint.event_types}::text[] is null or ev.type = any(${endpoint.event_types}::text[]))
      order by ev.id
      on conflict (endpoint_id, event_id) do update
        set status = 'waiting', attempts = 0, next_attempt_at = now(), last_error = null, updated_at = now()
      returning event_id`;
    return rows.length;
  });
}

/** Writes a `ping` event owed to this endpoint alone; answers its id, or undefined when the owner has no such endpoint. */
export async function sendWebhookPing(
  database: Database,
  clientId: string | null,
  endpointId: string,
): Promise<string | undefined> {
  const { sql } = database;
  const [row] = await sql<Array<{ id: string }>>`
    with endpoint as (
      select e.id, e.client_id from webhook_endpoints e where ${owned(database, clientId, endpointId)}
    ), event as (
      insert into webhook_events (client_id, type, data)
      select client_id, 'ping', jsonb_build_object('endpoint_id', id, 'client_id', client_id) from endpoint
      returning id
    ), delivery as (
      insert into webhook_deliveries (endpoint_id, event_id, next_attempt_at)
      select endpoint.id, event.id, now() from endpoint, event
    )
    select id from event`;
  return row && webhookMessageId(row.id);
}

export interface EndpointFigures {
  /** Deliveries owed and not yet delivered or dead. */
  backlog: number;
  dead: number;
  /** Over the last hour. */
  last_hour: {
    attempts: number;
    succeeded: number;
    failed: number;
    latency_ms_p50: number | null;
    latency_ms_p95: number | null;
  };
}

/** An endpoint's figures; undefined when the owner has no such endpoint. */
export async function readEndpointFigures(
  database: Database,
  clientId: string | null,
  endpointId: string,
): Promise<EndpointFigures | undefined> {
  const { sql } = database;
  const [row] = await sql<
    Array<{
      backlog: string;
      dead: string;
      attempts: string;
      succeeded: string;
      p50: number | null;
      p95: number | null;
    }>
  >`
    select
      (select count(*) from webhook_deliveries d where d.endpoint_id = e.id and d.status in ('waiting', 'queued')) as backlog,
      (select count(*) from webhook_deliveries d where d.endpoint_id = e.id and d.status = 'dead') as dead,
      a.attempts, a.succeeded, a.p50, a.p95
    from webhook_endpoints e
    cross join lateral (
      select count(*) as attempts,
             count(*) filter (where status_code between 200 and 299) as succeeded,
             percentile_disc(0.5) within group (order by latency_ms) as p50,
             percentile_disc(0.95) within group (order by latency_ms) as p95
      from webhook_attempts where endpoint_id = e.id and at > now() - interval '1 hour') a
    where ${owned(database, clientId, endpointId)}`;
  if (row === undefined) return undefined;
  const attempts = Number(row.attempts);
  const succeeded = Number(row.succeeded);
  return {
    backlog: Number(row.backlog),
    dead: Number(row.dead),
    last_hour: {
      attempts,
      succeeded,
      failed: attempts - succeeded,
      latency_ms_p50: row.p50,
      latency_ms_p95: row.p95,
    },
  };
}

/**
 * Forgets the webhook history older than `days`: attempts, and events no endpoint is still owed
 * (waiting or queued) with their deliveries, in batches of `batch`. Answers how many events went.
 */
export async function purgeWebhookHistory(database: Database, days: number, batch = 5000): Promise<number> {
  const { sql } = database;
  await sql`
    delete from webhook_attempts where ctid = any(array(
      select ctid from webhook_attempts where at < now() - make_interval(days => ${days}) limit ${batch}))`;
  const gone = await sql`
    with old as (
      select ev.id from webhook_events ev
      where ev.occurred_at < now() - make_interval(days => ${days})
        and not exists (select 1 from webhook_deliveries d where d.event_id = ev.id and d.status in ('waiting', 'queued'))
      order by ev.occurred_at limit ${batch}
    ), deliveries as (
      delete from webhook_deliveries d using old where d.event_id = old.id
    )
    delete from webhook_events ev using old where ev.id = old.id returning ev.id`;
  return gone.length;
}
