import { sql } from "drizzle-orm";
import {
  bigint,
  boolean,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
} from "drizzle-orm/pg-core";

/**
 * A client's outbound webhook endpoint: where its events are posted, which types it wants (null:
 * every type), and the secrets its posts are signed with (Standard Webhooks, `whsec_` + base64).
 * The secrets are kept as they are: signing needs them, as a provider's API key is needed to call
 * it. During a rotation's grace the previous secret signs too, until `previous_secret_expires_at`.
 */
export const webhookEndpoints = pgTable(
  "webhook_endpoints",
  {
    id: text("id").primaryKey(),
    clientId: text("client_id").notNull(),
    url: text("url").notNull(),
    eventTypes: text("event_types").array(),
    /**
     * What the endpoint's events carry beyond ids and outcomes, by the client's choice:
     * `notification_data` (the notification's template data, what its message is rendered from) and
     * `recipient` (the user's address on the event's channel, as stored when the post is made).
     */
    include: text("include").array().notNull().default(sql`'{}'::text[]`),
    description: text("description"),
    /** `enabled`, or `disabled` (by the client, or by the service after failing for too long). */
    status: text("status").notNull().default("enabled"),
    /** Why it is disabled: `by_client`, or `failing` (no success since `failing_since` for too long). */
    disabledReason: text("disabled_reason"),
    disabledAt: timestamp("disabled_at", { withTimezone: true, mode: "date" }),
    secret: text("secret").notNull(),
    previousSecret: text("previous_secret"),
    previousSecretExpiresAt: timestamp("previous_secret_expires_at", { withTimezone: true, mode: "date" }),
    /** Since when every attempt failed (null: the last attempt succeeded, or none was made). */
    failingSince: timestamp("failing_since", { withTimezone: true, mode: "date" }),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [index("webhook_endpoints_client_idx").on(t.clientId, t.id)],
);

/**
 * What happened to a client's notifications, written by triggers in the transaction of the change
 * itself (drizzle/0019_webhooks.sql), and only for a client with an enabled endpoint. `id` is the
 * event's sequence: a later change of the same channel always has a larger one.
 */
export const webhookEvents = pgTable(
  "webhook_events",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    clientId: text("client_id").notNull(),
    type: text("type").notNull(),
    notificationId: text("notification_id"),
    data: jsonb("data").notNull(),
    occurredAt: timestamp("occurred_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [
    index("webhook_events_client_idx").on(t.clientId, t.occurredAt, t.id),
    index("webhook_events_notification_idx").on(t.notificationId),
    // A notification is completed once, whichever of its channels' outcomes was checked last.
    uniqueIndex("webhook_events_completed_idx").on(t.notificationId).where(sql`${t.type} = 'notification.completed'`),
    // And a broadcast once, whichever dispatcher saw its last recipient end.
    uniqueIndex("webhook_events_broadcast_completed_idx")
      .on(sql`(${t.data}->>'broadcast_id')`)
      .where(sql`${t.type} = 'broadcast.completed'`),
  ],
);

/**
 * One event owed to one endpoint and where it stands: `waiting` (due at `next_attempt_at`),
 * `queued` (published for a sender), `delivered`, or `dead` (every attempt failed, or the endpoint
 * was disabled): the endpoint's dead letters, replayable. `run` counts its replays: each one starts
 * a new run of attempts, numbered from 1 again.
 */
export const webhookDeliveries = pgTable(
  "webhook_deliveries",
  {
    endpointId: text("endpoint_id")
      .notNull()
      .references(() => webhookEndpoints.id, { onDelete: "cascade" }),
    eventId: bigint("event_id", { mode: "number" }).notNull(),
    status: text("status").notNull().default("waiting"),
    /** 0 for the first run of attempts; each replay adds one. */
    run: integer("run").notNull().default(0),
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: timestamp("next_attempt_at", { withTimezone: true, mode: "date" }),
    lastError: text("last_error"),
    updatedAt: timestamp("updated_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.endpointId, t.eventId] }),
    // What the dispatcher takes, endpoint by endpoint: due deliveries, and queued ones whose
    // publish may have been lost.
    index("webhook_deliveries_due_idx")
      .on(t.endpointId, t.nextAttemptAt)
      .where(sql`${t.status} in ('waiting', 'queued')`),
    // The attempts each endpoint has in flight, counted against its limit on every round.
    index("webhook_deliveries_queued_idx").on(t.endpointId).where(sql`${t.status} = 'queued'`),
    index("webhook_deliveries_dead_idx").on(t.endpointId, t.updatedAt).where(sql`${t.status} = 'dead'`),
  ],
);

/**
 * Every post to an endpoint, with its answer: what `GET …/attempts` lists. An attempt is numbered
 * within its run (the delivery's first, or a replay), so a replay's posts are kept beside the
 * attempts before it.
 */
export const webhookAttempts = pgTable(
  "webhook_attempts",
  {
    endpointId: text("endpoint_id")
      .notNull()
      .references(() => webhookEndpoints.id, { onDelete: "cascade" }),
    eventId: bigint("event_id", { mode: "number" }).notNull(),
    /** The delivery's run this attempt belongs to: 0, or the replay that made it. */
    run: integer("run").notNull().default(0),
    attempt: integer("attempt").notNull(),
    /** The endpoint's HTTP status; null when no answer came (timeout, refused, address refused). */
    statusCode: integer("status_code"),
    latencyMs: integer("latency_ms").notNull(),
    error: text("error"),
    at: timestamp("at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.endpointId, t.eventId, t.run, t.attempt] }),
    index("webhook_attempts_endpoint_idx").on(t.endpointId, t.at),
  ],
);

/**
 * Notifications one of whose channels just reached an outcome, for a client with an endpoint
 * that wants `notification.completed`: the dispatcher decides, once the change is committed,
 * whether every channel's outcome is known, and writes that event once.
 */
export const webhookCompletionChecks = pgTable(
  "webhook_completion_checks",
  {
    notificationId: text("notification_id").primaryKey(),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    /** The notification's user: see notification_channels.user_id (schema/notifications.ts). */
    userId: text("user_id"),
  },
  // The dispatcher takes the oldest checks first.
  (t) => [index("webhook_completion_checks_created_idx").on(t.createdAt)],
);

/**
 * How far a broadcast's recipients have come, for a client with an endpoint that wanted
 * `broadcast.completed` when the broadcast was accepted: the dispatcher counts each recipient once,
 * when its notification is completed, by outcome, and writes `broadcast.completed` once the
 * broadcast is expanded (or cancelled) and every recipient it expanded is counted. `check_due`
 * asks the dispatcher to look again: the broadcast just finished expanding, or was cancelled.
 */
export const webhookBroadcastTallies = pgTable(
  "webhook_broadcast_tallies",
  {
    broadcastId: text("broadcast_id").primaryKey(),
    clientId: text("client_id").notNull(),
    ended: bigint("ended", { mode: "number" }).notNull().default(0),
    completed: bigint("completed", { mode: "number" }).notNull().default(0),
    partiallyFailed: bigint("partially_failed", { mode: "number" }).notNull().default(0),
    failed: bigint("failed", { mode: "number" }).notNull().default(0),
    suppressed: bigint("suppressed", { mode: "number" }).notNull().default(0),
    checkDue: boolean("check_due").notNull().default(false),
    /** When `broadcast.completed` was written; null until then. */
    completedAt: timestamp("completed_at", { withTimezone: true, mode: "date" }),
  },
  (t) => [
    index("webhook_broadcast_tallies_due_idx").on(t.broadcastId).where(sql`${t.checkDue}`),
    // Whether any broadcast's completion is awaited: the channel trigger asks once a statement.
    index("webhook_broadcast_tallies_open_idx").on(t.broadcastId).where(sql`${t.completedAt} is null`),
  ],
);
