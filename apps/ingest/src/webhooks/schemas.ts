import { WEBHOOK_EVENT_TYPES, WEBHOOK_INCLUDES } from "@notify/core";
import * as v from "valibot";

/** Endpoints a client may have: enough for every team's receiver, few enough to fan out cheaply. */
export const MAX_ENDPOINTS_PER_CLIENT = 20;
/** A rotation's grace: long enough to roll a receiver's secret out, not to keep two alive. */
export const MAX_SECRET_GRACE_SECONDS = 7 * 24 * 3600;
export const DEFAULT_SECRET_GRACE_SECONDS = 24 * 3600;
/** A replay covers at most this much time, or this many events by id. */
export const MAX_REPLAY_SECONDS = 7 * 24 * 3600;
export const MAX_REPLAY_IDS = 1000;

const Url = v.pipe(
  v.string("url must be a string"),
  v.trim(),
  v.minLength(1, "url must not be empty"),
  v.maxLength(2048, "url must be at most 2048 characters"),
  v.url("url must be a URL"),
);

const EventTypes = v.pipe(
  v.array(
    v.picklist(WEBHOOK_EVENT_TYPES, `event_types may only contain ${WEBHOOK_EVENT_TYPES.join(", ")}`),
    "event_types must be an array",
  ),
  v.minLength(1, "event_types must not be empty (leave it out for every type)"),
  v.checkItems((item, index, array) => array.indexOf(item) === index, "event_types must not repeat"),
);

const Include = v.pipe(
  v.array(
    v.picklist(WEBHOOK_INCLUDES, `include may only contain ${WEBHOOK_INCLUDES.join(", ")}`),
    "include must be an array",
  ),
  v.checkItems((item, index, array) => array.indexOf(item) === index, "include must not repeat"),
);

const Description = v.pipe(
  v.string("description must be a string"),
  v.maxLength(256, "description must be at most 256 characters"),
  v.regex(/^[^\p{Cc}]*$/u, "description must not contain control characters"),
);

/** Body of POST /api/v1/webhook-endpoints. */
export const CreateEndpointRequest = v.strictObject({
  url: Url,
  /** Absent: every event type, present and future. */
  event_types: v.optional(EventTypes),
  /** What events carry beyond ids and outcomes; absent: nothing more. */
  include: v.optional(Include),
  description: v.optional(Description),
});

/** Body of PATCH /api/v1/webhook-endpoints/{id}: what is given changes. */
export const UpdateEndpointRequest = v.strictObject({
  url: v.optional(Url),
  /** null: every event type. */
  event_types: v.optional(v.nullable(EventTypes)),
  include: v.optional(Include),
  description: v.optional(v.nullable(Description)),
  /** true enables a disabled endpoint (and forgets its failures); false disables it. */
  enabled: v.optional(v.boolean("enabled must be true or false")),
});

/** Body of POST /api/v1/webhook-endpoints/{id}/rotate-secret (optional). */
export const RotateSecretRequest = v.strictObject({
  grace_seconds: v.optional(
    v.pipe(
      v.number("grace_seconds must be a number"),
      v.integer("grace_seconds must be an integer"),
      v.minValue(0, "grace_seconds must be at least 0"),
      v.maxValue(MAX_SECRET_GRACE_SECONDS, `grace_seconds must be at most ${MAX_SECRET_GRACE_SECONDS}`),
    ),
    DEFAULT_SECRET_GRACE_SECONDS,
  ),
});

const EventId = v.pipe(
  v.string("event_ids must be strings"),
  v.regex(/^evt_[1-9][0-9]{0,17}$/, "event_ids must be event ids (evt_ and a number)"),
);

/** Body of POST /api/v1/webhook-endpoints/{id}/replay: a time range, or event ids. */
export const ReplayRequest = v.pipe(
  v.strictObject({
    since: v.optional(v.pipe(v.string("since must be a string"), v.isoTimestamp("since must be an RFC 3339 time"))),
    until: v.optional(v.pipe(v.string("until must be a string"), v.isoTimestamp("until must be an RFC 3339 time"))),
    event_ids: v.optional(
      v.pipe(
        v.array(EventId, "event_ids must be an array"),
        v.minLength(1, "event_ids must not be empty"),
        v.maxLength(MAX_REPLAY_IDS, `event_ids may hold at most ${MAX_REPLAY_IDS} ids`),
      ),
    ),
  }),
  v.check(
    (body) => (body.event_ids !== undefined) !== (body.since !== undefined),
    "give either since (with an optional until) or event_ids",
  ),
  v.check((body) => body.until === undefined || body.since !== undefined, "until needs since"),
);

/** Query of GET …/attempts and …/dead-letters. */
export const LimitQuery = v.strictObject({
  limit: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^[1-9][0-9]{0,2}$/, "limit must be an integer from 1 to 500"),
      v.transform(Number),
      v.maxValue(500, "limit must be an integer from 1 to 500"),
    ),
    "50",
  ),
});
