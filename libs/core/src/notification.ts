import * as v from "valibot";
import type { ChannelStatus } from "./channel-status.js";
import { CHANNELS, type Channel, PRIORITIES, type Priority } from "./channels.js";
import { parseRfc3339 } from "./deliver-by.js";
import { DigestRequest, ThrottleRequest } from "./digest.js";
import { FallbackChain } from "./fallback.js";
import type { NotificationStatus } from "./notification-status.js";
import { parseClock } from "./quiet-hours.js";
import { parseLocalDate } from "./schedule.js";

const id = (what: string) =>
  v.pipe(
    v.string(`${what} must be a string`),
    v.trim(),
    v.minLength(1, `${what} must not be empty`),
    v.maxLength(256, `${what} must be at most 256 characters`),
    v.regex(/^[\x21-\x7e]+$/, `${what} must be printable ASCII without spaces`),
  );

/** Body of POST /api/v1/notifications. Unknown fields are refused. */
export const NotificationRequest = v.strictObject({
  user_id: id("user_id"),
  category: v.pipe(
    v.string("category must be a string"),
    v.regex(/^[a-z0-9][a-z0-9_.-]{0,63}$/, "category must be 1-64 of a-z, 0-9, '_', '.', '-'"),
  ),
  template_id: id("template_id"),
  data: v.record(v.string(), v.unknown(), "data must be an object"),
  channels: v.optional(
    v.pipe(
      v.array(v.picklist(CHANNELS, `channels may only contain ${CHANNELS.join(", ")}`), "channels must be an array"),
      v.minLength(1, "channels must not be empty when present"),
      v.checkItems((item, index, array) => array.indexOf(item) === index, "channels must not repeat"),
    ),
  ),
  priority: v.picklist(PRIORITIES, `priority must be one of ${PRIORITIES.join(", ")}`),
  /**
   * Never sent after this instant: what is still unsent then ends as `expired`. In the future,
   * at most 28 days out (MAX_DEADLINE_SECONDS; checked against the clock at ingest).
   */
  deliver_by: v.optional(
    v.pipe(
      v.string("deliver_by must be a string"),
      v.check(
        (text) => parseRfc3339(text) !== null,
        "deliver_by must be an RFC 3339 date-time with an offset, e.g. 2026-11-25T18:00:00Z",
      ),
    ),
  ),
  /** Where to go next, in order, when the one channel in `channels` does not reach the user. */
  fallback: v.optional(FallbackChain),
  /**
   * Not routed before this instant: accepted now, held, and routed (preferences, quiet hours,
   * the cap) at that time. One in the past routes at once. At most MAX_SCHEDULE_DAYS out, and
   * before deliver_by when both are given (checked at ingest).
   */
  send_at: v.optional(
    v.pipe(
      v.string("send_at must be a string"),
      v.check(
        (text) => parseRfc3339(text) !== null,
        "send_at must be an RFC 3339 date-time with an offset, e.g. 2026-11-25T09:00:00Z",
      ),
    ),
  ),
  /** The same on the user's wall clock, in their time zone; not with send_at. */
  send_at_local: v.optional(
    v.strictObject(
      {
        time: v.pipe(
          v.string("send_at_local.time must be a string"),
          v.check((text) => parseClock(text) !== null, "send_at_local.time must be HH:MM, 00:00-23:59"),
        ),
        date: v.optional(
          v.pipe(
            v.string("send_at_local.date must be a string"),
            v.check((text) => parseLocalDate(text) !== null, "send_at_local.date must be a calendar date, YYYY-MM-DD"),
          ),
        ),
      },
      'send_at_local must be an object {"time": "HH:MM", "date"?: "YYYY-MM-DD"}',
    ),
  ),
  /** Collected with the user's other notifications of this template and key, and sent as one. */
  digest: v.optional(DigestRequest),
  /** At most `limit` of this key reach the user per `per`; the rest are suppressed (or digested). */
  throttle: v.optional(ThrottleRequest),
});
export type NotificationRequest = v.InferOutput<typeof NotificationRequest>;

/** Message on a lane subject: everything the processor needs, so it does not re-read the row. */
export const LaneMessage = v.object({
  notification_id: v.pipe(v.string(), v.nonEmpty()),
  client_id: v.string(),
  user_id: v.pipe(v.string(), v.nonEmpty()),
  category: v.string(),
  template_id: v.string(),
  /** Template version current at ingest; a message without one renders the latest. */
  template_version: v.optional(v.pipe(v.number(), v.integer())),
  priority: v.picklist(PRIORITIES),
  channels: v.nullable(v.array(v.picklist(CHANNELS))),
  data: v.record(v.string(), v.unknown()),
  created_at: v.string(),
  /** The deadline (ISO 8601, UTC), from the request or the template's time to live; absent: none. */
  deliver_by: v.optional(v.nullable(v.string())),
  /** Routed no earlier than this instant (ISO 8601, UTC): send_at, or send_at_local resolved; absent: at once. */
  send_at: v.optional(v.nullable(v.string())),
  /** Collected into a digest of its key; absent: sent alone. */
  digest: v.optional(
    v.nullable(v.object({ key: v.string(), window: v.string(), max_items: v.pipe(v.number(), v.integer()) })),
  ),
  /** Set on a digest's own notification: the digest it sends, its items in `data`. */
  digest_of: v.optional(v.nullable(v.string())),
  /** Its throttle; absent: none. */
  throttle: v.optional(
    v.nullable(
      v.object({
        key: v.string(),
        limit: v.pipe(v.number(), v.integer()),
        per: v.string(),
        over_limit: v.optional(v.picklist(["suppress", "digest"])),
      }),
    ),
  ),
});
export type LaneMessage = v.InferOutput<typeof LaneMessage>;

/** Per-channel work item: the rendered message and where it goes. */
export const WorkItem = v.object({
  notification_id: v.pipe(v.string(), v.nonEmpty()),
  channel: v.picklist(CHANNELS),
  priority: v.picklist(PRIORITIES),
  /**
   * The notification's client: what an email's unsubscribe link names. Absent on items queued
   * before work items carried it; such an email goes without the link.
   */
  client_id: v.optional(v.string()),
  user_id: v.string(),
  category: v.string(),
  /** Channel address: an email address, a phone number, a push subscription, or the user id. */
  to: v.string(),
  subject: v.nullable(v.string()),
  body: v.string(),
  /** Attempts already made (0 on the first delivery). */
  attempt: v.pipe(v.number(), v.integer(), v.minValue(0)),
  /** Not sent after this instant (ISO 8601); absent: no deadline. */
  deliver_by: v.optional(v.nullable(v.string())),
});
export type WorkItem = v.InferOutput<typeof WorkItem>;

/** What is wrong with a value read off a stream, field by field; null when it is valid. */
export function schemaProblem(schema: v.GenericSchema, value: unknown): string | null {
  const result = v.safeParse(schema, value, { abortEarly: false });
  if (result.success) return null;
  return result.issues
    .slice(0, 5)
    .map((issue) => `${v.getDotPath(issue) ?? "(root)"}: ${issue.message}`)
    .join("; ");
}

export interface ChannelResult {
  status: ChannelStatus;
  provider_id: string | null;
  reason: string | null;
  ts: string;
}

/** GET /api/v1/notifications/{id} body, plus non-breaking extras. */
export interface NotificationView {
  notification_id: string;
  user_id: string;
  category: string;
  template_id: string;
  priority: Priority;
  /** Derived from the channels by `notificationStatus` (notification-status.ts). */
  status: NotificationStatus;
  created_at: string;
  channels: Partial<Record<Channel, ChannelResult>>;
}
