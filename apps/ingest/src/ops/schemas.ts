import { CHANNELS } from "@notify/core";
import * as v from "valibot";
import { BROADCAST_STATUSES, BroadcastView } from "../broadcasts/schemas.js";
import { limitParam, offsetPageQuery } from "../pagination.js";
import { Timestamp } from "../routes/contract.js";

/** Results of GET /api/v1/ops/notifications when no limit is asked for. */
export const DEFAULT_SEARCH_LIMIT = 50;
/** Larger limits are clamped to this, not refused. */
export const MAX_SEARCH_LIMIT = 200;

const text = (field: string, max: number) =>
  v.pipe(
    v.string(`${field} must be a string`),
    v.minLength(1, `${field} must not be empty`),
    v.maxLength(max, `${field} must be at most ${max} characters`),
  );

/** Query of GET /api/v1/ops/notifications: what an operator finds a notification by, across clients. */
export const OpsNotificationsQuery = v.pipe(
  v.strictObject({
    notification_id: v.optional(text("notification_id", 256)),
    user_id: v.optional(text("user_id", 256)),
    /** Only this client's; required with idempotency_key. */
    client_id: v.optional(text("client_id", 256)),
    /** The Idempotency-Key the client sent (unique per client only: needs client_id). */
    idempotency_key: v.optional(text("idempotency_key", 255)),
    limit: limitParam(DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT),
  }),
  v.forward(
    v.partialCheck(
      [["notification_id"], ["user_id"], ["idempotency_key"]],
      (q) => q.notification_id !== undefined || q.user_id !== undefined || q.idempotency_key !== undefined,
      "give at least one of notification_id, user_id, idempotency_key",
    ),
    ["notification_id"],
  ),
  v.forward(
    v.partialCheck(
      [["idempotency_key"], ["client_id"]],
      (q) => q.idempotency_key === undefined || q.client_id !== undefined,
      "client_id is required with idempotency_key: a key is unique per client only",
    ),
    ["client_id"],
  ),
);
export type OpsNotificationsQuery = v.InferOutput<typeof OpsNotificationsQuery>;

const Consumer = v.object({
  name: v.string(),
  filter_subject: v.nullable(v.string()),
  num_pending: v.pipe(v.number(), v.metadata({ description: "Messages not delivered yet" })),
  num_ack_pending: v.pipe(v.number(), v.metadata({ description: "Delivered, not acknowledged yet" })),
  num_redelivered: v.number(),
  num_waiting: v.pipe(v.number(), v.metadata({ description: "Pull requests waiting for messages" })),
  last_active: v.pipe(
    v.nullable(Timestamp),
    v.metadata({ description: "The latest delivery or acknowledgement; null when the server does not say (< 2.10)" }),
  ),
});

export const StreamList = v.object({
  data: v.array(
    v.object({
      name: v.string(),
      subjects: v.array(v.string()),
      messages: v.number(),
      bytes: v.number(),
      first_seq: v.number(),
      last_seq: v.number(),
      consumers: v.pipe(v.array(Consumer), v.metadata({ description: "The service's own (durable) consumers" })),
      ephemeral_consumers: v.pipe(
        v.number(),
        v.metadata({
          description:
            "Ephemeral consumers open on the stream: readers (notify dlq list, the console, nats stream view), gone seconds after they stop",
        }),
      ),
    }),
  ),
});

const BREAKER_STATES = ["open", "closed", "half_open"] as const;
const Lane = v.object({
  rate_per_second: v.number(),
  burst: v.number(),
  waiting: v.pipe(
    v.number(),
    v.metadata({
      description: "Sends of the lane waiting for a token in that process, a request to the bucket in flight included",
    }),
  ),
});

export const ProviderList = v.object({
  data: v.array(
    v.object({
      provider: v.string(),
      channel: v.picklist(CHANNELS),
      breaker: v.object({
        state: v.pipe(
          v.picklist(BREAKER_STATES),
          v.metadata({ description: "open if a live worker reports it open, else half_open if one does, else closed" }),
        ),
        decided: v.pipe(
          v.nullable(v.picklist(["open", "closed"])),
          v.metadata({
            description:
              "The last decision shared between the workers (one opened it for all, or closed it again); null when none was shared",
          }),
        ),
        decided_by: v.pipe(
          v.nullable(v.string()),
          v.metadata({ description: "The worker process (host:pid) whose breaker last opened or closed it for all" }),
        ),
        decided_at: v.nullable(Timestamp),
      }),
      workers: v.array(
        v.object({
          worker: v.string(),
          breaker: v.picklist(BREAKER_STATES),
          reported_at: Timestamp,
          lanes: v.pipe(
            v.object({ transactional: Lane, promotional: Lane }),
            v.metadata({
              description:
                "transactional: the reserve only transactional sends use (rate 0 without one); promotional: the shared bucket, which transactional sends use too once their reserve is spent",
            }),
          ),
        }),
      ),
      tokens: v.pipe(
        v.nullable(v.object({ transactional: v.number(), promotional: v.number() })),
        v.metadata({
          description:
            "Sends each lane could make now from the shared buckets (notify_rate), at the rates the workers report; null when no live worker reports the provider",
        }),
      ),
    }),
  ),
});

/** Query of GET /api/v1/ops/broadcasts (offset pagination). */
export const OpsBroadcastsQuery = v.strictObject({
  ...offsetPageQuery,
  status: v.optional(v.picklist(BROADCAST_STATUSES, `status must be one of ${BROADCAST_STATUSES.join(", ")}`)),
});
export type OpsBroadcastsQuery = v.InferOutput<typeof OpsBroadcastsQuery>;

export const OpsBroadcastView = v.object({ ...BroadcastView.entries, client_id: v.string() });
export type OpsBroadcastView = v.InferOutput<typeof OpsBroadcastView>;

export const OpsBroadcastPage = v.object({
  data: v.array(OpsBroadcastView),
  page: v.number(),
  page_size: v.number(),
  total_count: v.number(),
});
