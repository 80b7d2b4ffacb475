import type { Channel, DigestSpec, FallbackStep, Priority, SendAtLocal, ThrottleSpec } from "@notify/core";
import { unnestColumns } from "../batch.js";
import type { Database } from "../pool.js";

/** One accepted request of a group commit, as its notification row and idempotency record. */
export interface AcceptedRow {
  id: string;
  client_id: string;
  key: string;
  request_hash: string;
  user_id: string;
  category: string;
  template_id: string;
  template_version: number | null;
  priority: Priority;
  channels: Channel[] | null;
  data: Record<string, unknown>;
  partition: number;
  /** ISO 8601; null: no deadline. */
  deliver_by: string | null;
  /** ISO 8601: routed no earlier; null or absent: at once. */
  send_at?: string | null;
  /** The request's wall-clock send time, kept for its status; null or absent: none. */
  send_at_local?: SendAtLocal | null;
  /** The request's digest and throttle; null or absent: none. */
  digest?: DigestSpec | null;
  throttle?: ThrottleSpec | null;
  /** The channel fallback chain after `channels[0]`; null: none. */
  fallback: FallbackStep[] | null;
  /** W3C traceparent of the request's span; left out when tracing is off. */
  trace_parent?: string;
}

export interface AcceptedBatch {
  /** The notifications inserted; a request missing here lost its key. */
  inserted: Set<string>;
  /** When they were stored (the statement's time, the same for all); null when none was. */
  createdAt: Date | null;
  /** The batch's outbox row, listing every inserted notification; null when none was. */
  outboxId: string | null;
}

/** SQLSTATE of a claim that found one of its later slots held (drizzle/0030_idempotency_slots.sql). */
const SPREAD_RACE = "NI030";
/** How many times the statement runs when it meets that race (once more is enough: see the retry). */
const SPREAD_ATTEMPTS = 3;

/**
 * The group commit's one statement: claims the idempotency keys (a key older than
 * `dedupWindowHours` is taken over; a claim writes a row in each UTC day its window overlaps),
 * inserts the notifications whose key was claimed (with their fallback chains) and lists them in
 * one outbox row, committed together or not at all. Two rows of one batch must not share a
 * (client, key): the caller sends the first and treats the rest as in flight.
 */
export async function acceptNotifications(
  database: Database,
  rows: readonly AcceptedRow[],
  dedupWindowHours: number,
): Promise<AcceptedBatch> {
  // One text array per column, unnested: PostgreSQL reads arrays of text at almost no cost, where
  // the same batch as one JSON document would be parsed row by row in the statement. The JSON
  // columns travel as text and are parsed one value at a time. A nullable field left undefined (a
  // JavaScript caller) is stored as null. The channels travel joined by commas: no channel name
  // has one.
  const text = <T>(pick: (row: AcceptedRow) => T) => ["text", rows.map(pick)] as const;
  const input = unnestColumns(database.sql, "i", {
    id: text((r) => r.id),
    client_id: text((r) => r.client_id),
    key: text((r) => r.key),
    request_hash: text((r) => r.request_hash),
    user_id: text((r) => r.user_id),
    category: text((r) => r.category),
    template_id: text((r) => r.template_id),
    template_version: text((r) => (r.template_version == null ? null : String(r.template_version))),
    priority: text((r) => r.priority),
    channels: text((r) => (r.channels == null ? null : r.channels.join(","))),
    data: text((r) => JSON.stringify(r.data)),
    partition: text((r) => String(r.partition)),
    deliver_by: text((r) => r.deliver_by ?? null),
    send_at: text((r) => r.send_at ?? null),
    send_at_local: text((r) => (r.send_at_local == null ? null : JSON.stringify(r.send_at_local))),
    digest: text((r) => (r.digest == null ? null : JSON.stringify(r.digest))),
    throttle: text((r) => (r.throttle == null ? null : JSON.stringify(r.throttle))),
    fallback: text((r) => (r.fallback == null ? null : JSON.stringify(r.fallback))),
    trace_parent: text((r) => r.trace_parent ?? null),
  });
  const statement = () => database.sql<{ ids: string[] | null; created_at: Date | null; outbox_id: string | null }[]>`
    with input as (
      select i.id, i.client_id, i.key, i.request_hash, i.user_id, i.category, i.template_id,
        i.template_version::int as template_version, i.priority,
        string_to_array(i.channels, ',') as channels, i.data::jsonb as data, i.partition::int as partition,
        i.deliver_by::timestamptz as deliver_by, i.send_at::timestamptz as send_at,
        i.send_at_local::jsonb as send_at_local, i.digest::jsonb as digest, i.throttle::jsonb as throttle,
        i.fallback::jsonb as fallback, i.trace_parent
      from ${input}
    ),
    -- A key held by a record of the legacy table (claimed before the guard was partitioned, and
    -- still in the window) is not claimed: nothing writes to that table any more, so what this
    -- statement's snapshot reads of it is all there is.
    fresh as (
      select * from input i
      where not exists (select 1 from idempotency_keys_legacy l
        where l.client_id = i.client_id and l.key = i.key and l.created_at >= now() - make_interval(hours => ${dedupWindowHours}))
    ),
    -- The claim in the slot of the statement's day: where every claim of the key still in the
    -- window has a row, so the key (client_id, key, slot) serializes two claims of one key. In
    -- key order, as every batch takes them.
    claimed as (
      insert into idempotency_keys (client_id, key, slot, request_hash, notification_id, created_at)
      select client_id, key, notify_idempotency_slot(now()), request_hash, id, now() from fresh
      order by client_id, key
      on conflict (client_id, key, slot) do update
        set request_hash = excluded.request_hash, notification_id = excluded.notification_id, created_at = now()
        where idempotency_keys.created_at < now() - make_interval(hours => ${dedupWindowHours})
      returning notification_id
    ),
    -- The won claims' rows in the later days the window overlaps, where the claims of those days
    -- look (a row there past the window is taken over too).
    spread as (
      insert into idempotency_keys (client_id, key, slot, request_hash, notification_id, created_at)
      select i.client_id, i.key, s.slot, i.request_hash, i.id, now()
      from input i
      join claimed c on c.notification_id = i.id
      cross join notify_idempotency_later_slots(now(), make_interval(hours => ${dedupWindowHours})) as s(slot)
      order by i.client_id, i.key, s.slot
      on conflict (client_id, key, slot) do update
        set request_hash = excluded.request_hash, notification_id = excluded.notification_id, created_at = now()
        where idempotency_keys.created_at < now() - make_interval(hours => ${dedupWindowHours})
      returning notification_id
    ),
    -- A claim won only with all its rows; one that found a later slot held (another claim across
    -- midnight got there first) fails the statement (notify_idempotency_spread, SQLSTATE NI030),
    -- which runs again.
    won as (
      select c.notification_id from claimed c
      left join (select notification_id, count(*)::int as written from spread group by notification_id) s
        on s.notification_id = c.notification_id
      where notify_idempotency_spread(coalesce(s.written, 0), make_interval(hours => ${dedupWindowHours}))
    ),
    inserted as (
      insert into notifications (id, client_id, user_id, category, template_id, template_version, priority, requested_channels, data, dedup_key, request_hash, partition, deliver_by, send_at, send_at_local, digest, throttle, trace_parent)
      select id, client_id, user_id, category, template_id, template_version, priority, channels, data, key,
             request_hash, partition, deliver_by, send_at, send_at_local, digest, throttle, trace_parent
      from input where id in (select notification_id from won)
      returning id, created_at
    ),
    fallbacks as (
      insert into notification_fallbacks (notification_id, steps, watching, user_id)
      select id, fallback, channels[1], user_id from input
      where fallback is not null and id in (select notification_id from won)
    ),
    outbox as (
      insert into publish_outbox (notification_ids) select array_agg(id) from inserted having count(*) > 0 returning id
    )
    select array_agg(id) as ids, max(created_at) as created_at, (select id from outbox)::text as outbox_id
    from inserted`;
  // A statement that met a claim across midnight holding one of its later slots wrote nothing; run
  // again, it is later than that claim and meets it in its own day's slot.
  let result: Awaited<ReturnType<typeof statement>>;
  for (let attempt = 1; ; attempt++) {
    try {
      result = await statement();
      break;
    } catch (error) {
      if (attempt >= SPREAD_ATTEMPTS || (error as { code?: string }).code !== SPREAD_RACE) throw error;
    }
  }
  const [batch] = result;
  // One row whatever the batch's size: no row (and no timestamp) to parse per notification.
  return {
    inserted: new Set(batch?.ids ?? []),
    createdAt: batch?.created_at ?? null,
    outboxId: batch?.outbox_id ?? null,
  };
}
