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
  /** The delivery's run the attempt belongs to: 0 for the first, one more for each replay. */
  run: number;
  /** The attempt within its run, from 1. */
  attempt: number;
  status_code: number | null;
  latency_ms: number;
  error: string | null;
  at: string;
}

export interface DeadDeliveryView {
  event_id: string;
  event_type: string;
  attempts: number;
  last_error: string | null;
  occurred_at: string;
  died_at: string;
}

/** A view's row as selected: instants are Dates, and event_id is the event's stored id. */
type Stored<View, Instants extends keyof View> = Omit<View, Instants> & { [K in Instants]: Date };
type Shown<Row> = { [K in keyof Row]: Row[K] extends Date ? string : Row[K] };

/**
 * A row selected under its view's names, as the API shows it: the event's id as its webhook-id
 * (evt_…), every instant in RFC 3339 UTC.
 */
function toView<Row extends { event_id: string }>(row: Row): Shown<Row> {
  const view: Record<string, unknown> = {};
  for (const [name, value] of Object.entries<unknown>(row)) {
    view[name] =
      name === "event_id" ? webhookMessageId(value as string) : value instanceof Date ? value.toISOString() : value;
  }
  return view as Shown<Row>;
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
  const rows = await sql<Array<Stored<WebhookAttemptView, "at">>>`
    select a.event_id, ev.type as event_type, a.run, a.attempt, a.status_code, a.latency_ms, a.error, a.at
    from webhook_attempts a join webhook_events ev on ev.id = a.event_id
    where a.endpoint_id = ${endpointId}
    order by a.at desc, a.event_id desc, a.run desc, a.attempt desc limit ${limit}`;
  return rows.map(toView);
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
  const rows = await sql<Array<Stored<DeadDeliveryView, "occurred_at" | "died_at">>>`
    select d.event_id, ev.type as event_type, d.attempts, d.last_error, ev.occurred_at, d.updated_at as died_at
    from webhook_deliveries d join webhook_events ev on ev.id = d.event_id
    where d.endpoint_id = ${endpointId} and d.status = 'dead'
    order by d.updated_at desc, d.event_id desc limit ${limit}`;
  return rows.map(toView);
}

export type ReplaySelection = { since: Date; until: Date } | { eventIds: number[] };

/**
 * Owes the endpoint again the events selected (its client's, of the types it wants, ping
 * excepted), whatever became of them before: each is posted once more, as a new run of attempts
 * (the delivery's `run` one more, its attempts counted from 1 again, so they are recorded beside
 * the earlier runs' and a message of an earlier run claims none of them) with its own webhook-id
 * unchanged. Answers how many, or undefined when the owner has no such endpoint.
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
        set status = 'waiting', run = webhook_deliveries.run + 1, attempts = 0, next_attempt_at = now(),
          last_error = null, updated_at = now()
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

/**
 * The figures of the endpoints named that the owner (null: any client) has, by endpoint id; one
 * query for them all, so a listing of every endpoint costs one round trip.
 */
export async function readEndpointFigures(
  database: Database,
  clientId: string | null,
  endpointIds: readonly string[],
): Promise<Map<string, EndpointFigures>> {
  const { sql } = database;
  const rows = await sql<
    Array<{
      id: string;
      backlog: string;
      dead: string;
      attempts: string;
      succeeded: string;
      p50: number | null;
      p95: number | null;
    }>
  >`
    with e as (
      select e.id from webhook_endpoints e
      where e.id = any(${endpointIds}::text[]) ${clientId === null ? sql`` : sql`and e.client_id = ${clientId}`}
    ), d as (
      select endpoint_id,
             count(*) filter (where status in ('waiting', 'queued')) as backlog,
             count(*) filter (where status = 'dead') as dead
      from webhook_deliveries
      where endpoint_id in (select id from e) and status in ('waiting', 'queued', 'dead')
      group by endpoint_id
    ), a as (
      select endpoint_id,
             count(*) as attempts,
             count(*) filter (where status_code between 200 and 299) as succeeded,
             percentile_disc(0.5) within group (order by latency_ms) as p50,
             percentile_disc(0.95) within group (order by latency_ms) as p95
      from webhook_attempts
      where endpoint_id in (select id from e) and at > now() - interval '1 hour'
      group by endpoint_id
    )
    select e.id, coalesce(d.backlog, 0) as backlog, coalesce(d.dead, 0) as dead,
           coalesce(a.attempts, 0) as attempts, coalesce(a.succeeded, 0) as succeeded, a.p50, a.p95
    from e left join d on d.endpoint_id = e.id left join a on a.endpoint_id = e.id`;
  const figures = new Map<string, EndpointFigures>();
  for (const row of rows) {
    const attempts = Number(row.attempts);
    const succeeded = Number(row.succeeded);
    figures.set(row.id, {
      backlog: Number(row.backlog),
      dead: Number(row.dead),
      last_hour: {
        attempts,
        succeeded,
        failed: attempts - succeeded,
        latency_ms_p50: row.p50,
        latency_ms_p95: row.p95,
      },
    });
  }
  return figures;
}

/**
 * Forgets the webhook history older than `days`: attempts, the tallies of broadcasts accepted
 * before then (their recipients' notifications are retired with them), and events no endpoint is
 * still owed (waiting or queued) with their deliveries, in batches of `batch`. Answers how many
 * events went.
 */
export async function purgeWebhookHistory(database: Database, days: number, batch = 5000): Promise<number> {
  const { sql } = database;
  await sql`
    delete from webhook_attempts where ctid = any(array(
      select ctid from webhook_attempts where at < now() - make_interval(days => ${days}) limit ${batch}))`;
  await sql`
    delete from webhook_broadcast_tallies t using broadcasts b
    where b.id = t.broadcast_id and b.created_at < now() - make_interval(days => ${days})`;
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
