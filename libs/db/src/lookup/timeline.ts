import type { Channel, ChannelStatus, FallbackCondition } from "@notify/core";
import type { Database } from "../pool.js";

// A notification's history as its timeline shows it: routing, attempts, status moves, fallback
// steps and provider receipts, merged from the tables that record each.

/** One entry of a notification's history, oldest first. */
export type TimelineEntry =
  | {
      /**
       * The routing decision for the channel: `pending` (to be sent), or suppressed, deferred or
       * expired with the reason (an opt-out, quiet hours, the daily cap, no address).
       */
      event: "routed";
      at: string;
      channel: Channel;
      status: ChannelStatus;
      reason: string | null;
    }
  | {
      /** A provider call and what came of it. */
      event: "attempt";
      at: string;
      channel: Channel;
      attempt: number;
      provider: string | null;
      outcome: string;
      provider_id: string | null;
      error: string | null;
    }
  | {
      /** A status the channel took after routing (retrying, parked, delivered, bounced, expired...). */
      event: "status";
      at: string;
      channel: Channel;
      status: ChannelStatus;
      reason: string | null;
      attempt: number;
      provider_id: string | null;
    }
  | {
      /** A step of the channel fallback chain taken: `channel` was routed because `from` was not enough. */
      event: "fallback";
      at: string;
      channel: Channel;
      from: Channel;
      because: FallbackCondition;
    }
  | {
      /** A provider's receipt (webhook event) about a send of the channel, when it was received. */
      event: "receipt";
      at: string;
      channel: Channel;
      provider: string;
      /** The provider's event: delivered, bounce, dropped, undelivered... */
      receipt: string;
      provider_id: string;
      /** Only when the receipt gave one (a bounce's reason, a Plivo error code). */
      reason?: string;
    };

/** How many entries of a notification's history are shown at most: the latest ones. */
export const TIMELINE_LIMIT = 200;

/**
 * A notification's history, oldest first: every provider call (with the provider, its outcome
 * and error), every status its channels took, every fallback step taken (a fallback first
 * among entries of the same instant: it made the channel the others are about) and every
 * provider receipt about one of its sends (bound by provider and provider id to a channel or an
 * attempt of it), the latest TIMELINE_LIMIT of them. Read only
 * for a notification the caller has already found as its own.
 */
export async function readNotificationTimeline(database: Database, id: string): Promise<TimelineEntry[]> {
  const rows = await database.sql<
    Array<{
      event: TimelineEntry["event"];
      at: Date;
      channel: Channel;
      attempt: number;
      provider: string | null;
      outcome: string | null;
      status: ChannelStatus | null;
      reason: string | null;
      provider_id: string | null;
    }>
  >`
    select * from (
      select 'attempt' as event, at, channel, attempt, provider, outcome, null as status, error as reason, provider_id, 0 as kind, 0::bigint as seq
      from delivery_attempts where notification_id = ${id}
      union all
      select 'status', at, channel, attempt, null, null, status, reason, provider_id, 1, id
      from channel_status_events where notification_id = ${id}
      union all
      select 'fallback', (step ->> 'at')::timestamptz, step ->> 'to', null, step ->> 'from', null, null,
        step ->> 'because', null, -2, position
      from notification_fallbacks f, jsonb_array_elements(f.taken) with ordinality as t(step, position)
      where f.notification_id = ${id}
      union all
      select 'routed', routed_at, channel, 0, null, null, routed_status, routed_reason, null, -1, 0
      from notification_channels where notification_id = ${id} and routed_at is not null and routed_status is not null
      union all
      -- The provider's name of the event, from the payload as the receipts app stored it: SendGrid's
      -- event (delivered, bounce, dropped...), Plivo's report Status; else the status it moved to.
      select 'receipt', r.received_at, s.channel, null, r.provider,
        coalesce(r.payload ->> 'event', lower(r.payload -> 'report' ->> 'Status'), nullif(r.status, 'none'), 'unknown'),
        null, r.reason, r.provider_id, 2, 0
      from (
        select channel, provider, provider_id from notification_channels
        where notification_id = ${id} and provider is not null and provider_id is not null
        union
        select channel, provider, provider_id from delivery_attempts
        where notification_id = ${id} and provider is not null and provider_id is not null
      ) s join provider_receipts r on r.provider = s.provider and r.provider_id = s.provider_id
        -- Its partition of the receipts, the default one (receipts that name no notification)
        -- and the first (receipts from before the receipts were partitioned, ''): see 0031.
        and (r.notification_id = ${id} or r.notification_id = '' or r.notification_id is null)
      order by at desc, kind desc, seq desc limit ${TIMELINE_LIMIT}
    ) latest order by at, kind, seq`;
  return rows.map((row): TimelineEntry => {
    const at = row.at.toISOString();
    if (row.event === "fallback")
      // The fallback rows carry the channel left in `provider` and the condition in `reason`.
      return {
        event: "fallback",
        at,
        channel: row.channel,
        from: row.provider as Channel,
        because: row.reason as FallbackCondition,
      };
    if (row.event === "receipt")
      // The receipt rows carry the provider's event name in `outcome`.
      return {
        event: "receipt",
        at,
        channel: row.channel,
        provider: row.provider as string,
        receipt: row.outcome ?? "unknown",
        provider_id: row.provider_id as string,
        ...(row.reason === null ? {} : { reason: row.reason }),
      };
    if (row.event === "routed")
      return { event: "routed", at, channel: row.channel, status: row.status as ChannelStatus, reason: row.reason };
    if (row.event === "attempt")
      return {
        event: "attempt",
        at,
        channel: row.channel,
        attempt: row.attempt,
        provider: row.provider,
        outcome: row.outcome ?? "",
        provider_id: row.provider_id,
        error: row.reason,
      };
    return {
      event: "status",
      at,
      channel: row.channel,
      status: row.status as ChannelStatus,
      reason: row.reason,
      attempt: row.attempt,
      provider_id: row.provider_id,
    };
  });
}
