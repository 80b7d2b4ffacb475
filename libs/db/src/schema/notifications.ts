import type { DigestSpec, FallbackCondition, FallbackStep, SendAtLocal, ThrottleSpec } from "@notify/core";
import { sql } from "drizzle-orm";
import {
  bigint,
  index,
  integer,
  jsonb,
  pgSequence,
  pgTable,
  primaryKey,
  smallint,
  text,
  timestamp,
  unique,
} from "drizzle-orm/pg-core";

/**
 * The notification log: append-only on the ingest path, one row per accepted notification.
 * Read by id and by (user_id, created_at desc, id). Whether its lane publish was acknowledged
 * is kept apart, in `publish_outbox`, so that no row is ever updated after its insert.
 */
export const notifications = pgTable(
  "notifications",
  {
    id: text("id").primaryKey(),
    clientId: text("client_id").notNull(),
    userId: text("user_id").notNull(),
    category: text("category").notNull(),
    templateId: text("template_id").notNull(),
    /** The template version current at ingest: a later edit never changes a queued message. */
    templateVersion: integer("template_version"),
    priority: text("priority").notNull(),
    /** The request's channels override; null when the user's preferences decide. */
    requestedChannels: text("requested_channels").array(),
    data: jsonb("data").notNull(),
    dedupKey: text("dedup_key").notNull(),
    /** SHA-256 of the canonical request, to tell a replay from a reused key with a new body. */
    requestHash: text("request_hash").notNull(),
    partition: smallint("partition").notNull(),
    /** Never sent after this instant (the request's deliver_by, or the template's time to live). */
    deliverBy: timestamp("deliver_by", { withTimezone: true, mode: "date" }),
    /** Not routed before this instant (the request's send_at); null: at once. */
    sendAt: timestamp("send_at", { withTimezone: true, mode: "date" }),
    /**
     * The request's send_at_local: a wall-clock time (and optional date) resolved in the user's
     * time zone when the notification is routed; null: none.
     */
    sendAtLocal: jsonb("send_at_local").$type<SendAtLocal | null>(),
    /** The request's digest: collected with others of its key and sent as one; null: sent alone. */
    digest: jsonb("digest").$type<DigestSpec | null>(),
    /** The request's throttle: at most `limit` of its key reach the user per `per`; null: none. */
    throttle: jsonb("throttle").$type<ThrottleSpec | null>(),
    /** Set on a digest's own notification: the digest it sends (its data holds the items). */
    digestOf: text("digest_of"),
    /**
     * W3C traceparent of the ingest request's span when tracing is on (null otherwise): later
     * work with no message to carry it (receipts, fallback steps, republishes) joins its trace.
     */
    traceParent: text("trace_parent"),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [
    index("notifications_user_created_idx").on(t.userId, t.createdAt.desc(), t.id),
    // Retention's batches, oldest first: without it each batch scanned the whole log.
    index("notifications_created_idx").on(t.createdAt),
  ],
);

/**
 * Invariant 1's outbox: one row per committed batch of notifications whose lane publishes are
 * not all acknowledged yet, inserted in the same statement as the batch and deleted once every
 * publish is acknowledged (or the failed rows removed again). One row per batch rather than a
 * mark per notification keeps the hot path to inserts; the table holds only the batches in
 * flight (a few rows), plus those a crash or a NATS outage left for the recovery sweep.
 */
export const publishOutbox = pgTable("publish_outbox", {
  id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
  notificationIds: text("notification_ids").array().notNull(),
  createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
});

/**
 * Per-channel delivery result of a notification. Status moves forward only (libs/core
 * status.ts); receipts find their row by (provider, provider_id).
 */
export const notificationChannels = pgTable(
  "notification_channels",
  {
    notificationId: text("notification_id").notNull(),
    channel: text("channel").notNull(),
    status: text("status").notNull(),
    provider: text("provider"),
    providerId: text("provider_id"),
    reason: text("reason"),
    attempts: integer("attempts").notNull().default(0),
    /**
     * `attempts` when the channel was last replayed from the dead-letter queue: the retry budget
     * (MAX_ATTEMPTS) counts only the attempts after it, while attempt numbers keep growing so the
     * history of every run is kept.
     */
    attemptsBeforeReplay: integer("attempts_before_replay").notNull().default(0),
    /** When a deferred, retrying or parked channel is next due. */
    nextAttemptAt: timestamp("next_attempt_at", { withTimezone: true, mode: "date" }),
    updatedAt: timestamp("updated_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    /**
     * The routing decision, kept as it was made while `status` and `reason` move on: when,
     * what (pending to send, suppressed, deferred, expired) and why (an opt-out, quiet hours, the
     * daily cap). Null on a channel with no routing decision recorded.
     */
    routedAt: timestamp("routed_at", { withTimezone: true, mode: "date" }).defaultNow(),
    routedStatus: text("routed_status"),
    routedReason: text("routed_reason"),
    /**
     * The notification's user (its shard on a PostgreSQL distributed by user). Null on rows
     * written before migration 0029 until they are filled in (docs/capacity.md, "Sharded by
     * user"); a row of a later notification id must carry it (the table's user_id check).
     */
    userId: text("user_id"),
  },
  (t) => [
    primaryKey({ columns: [t.notificationId, t.channel] }),
    // The provider id first, here and on provider_receipts' keys: a plan made before the table
    // had rows (a prepared statement's generic plan on a fresh database) may look a key up by
    // its leading column alone, and a leading provider name would then read every send of that
    // provider per receipt.
    index("notification_channels_provider_id_idx").on(t.providerId, t.provider),
    // The reconciler's view: channels waiting to be sent, and in-app sends left unsettled.
    index("notification_channels_waiting_idx")
      .on(t.updatedAt)
      .where(
        sql`${t.status} in ('pending', 'deferred', 'retrying', 'parked') or (${t.channel} = 'in_app' and ${t.status} = 'unsettled')`,
      ),
  ],
);

/**
 * Where a periodic sweep stands (the reconciler's scan of notifications, by id): kept in
 * Postgres so that whichever instance runs the sweep next goes on from there.
 */
export const sweepPositions = pgTable("sweep_positions", {
  name: text("name").primaryKey(),
  position: text("position").notNull(),
  updatedAt: timestamp("updated_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
});

/**
 * Every status a channel took after routing, with its time and reason: the log an operator reads
 * to see why a message was late (parked behind an open breaker, retried, replayed). Written in
 * the same statement as the status itself, so the two never disagree.
 */
export const channelStatusEventIds = pgSequence("channel_status_events_id_seq");

export const channelStatusEvents = pgTable(
  "channel_status_events",
  {
    /**
     * From a sequence rather than an identity column: PostgreSQL 15 has no identity columns on a
     * partitioned table. Unique with the notification id, the partition key.
     */
    id: bigint("id", { mode: "number" }).notNull().default(sql`nextval('channel_status_events_id_seq')`),
    notificationId: text("notification_id").notNull(),
    channel: text("channel").notNull(),
    status: text("status").notNull(),
    reason: text("reason"),
    /** The channel's attempt count at the transition. */
    attempt: integer("attempt").notNull(),
    providerId: text("provider_id"),
    at: timestamp("at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    /** The notification's user: see notification_channels.user_id. */
    userId: text("user_id"),
  },
  (t) => [primaryKey({ name: "channel_status_events_pkey", columns: [t.notificationId, t.channel, t.id] })],
);

/** Every provider call, with its outcome: the history a dead letter carries. */
export const deliveryAttempts = pgTable(
  "delivery_attempts",
  {
    notificationId: text("notification_id").notNull(),
    channel: text("channel").notNull(),
    attempt: integer("attempt").notNull(),
    outcome: text("outcome").notNull(),
    /** The provider called (email may fail over from one to the next); null when a row names none. */
    provider: text("provider"),
    providerId: text("provider_id"),
    error: text("error"),
    at: timestamp("at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    /** The notification's user: see notification_channels.user_id. */
    userId: text("user_id"),
  },
  (t) => [primaryKey({ columns: [t.notificationId, t.channel, t.attempt] })],
);

/**
 * Provider receipts (webhook events), deduplicated by the provider's event id and kept even
 * when no send with their provider id is known yet, to be applied once it is.
 */
export const providerReceipts = pgTable(
  "provider_receipts",
  {
    provider: text("provider").notNull(),
    eventId: text("event_id").notNull(),
    providerId: text("provider_id").notNull(),
    status: text("status").notNull(),
    reason: text("reason"),
    payload: jsonb("payload").notNull(),
    receivedAt: timestamp("received_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    appliedAt: timestamp("applied_at", { withTimezone: true, mode: "date" }),
    /**
     * The notification the receipt names (its payload's notification_id: SendGrid's custom args,
     * Plivo's report URL), the partition key (drizzle/0031): the receipt lives and is retired
     * with its notification's partition of the log. Null when it names none (the default
     * partition); '' for receipts from before 0031 (the first partition).
     */
    notificationId: text("notification_id"),
  },
  (t) => [
    // One receipt per event: a provider's retry names the same notification, and one that names
    // none (null) is one of the nulls that count as equal here.
    unique("provider_receipts_event_key").on(t.notificationId, t.eventId, t.provider).nullsNotDistinct(),
    // The receipts waiting for their send, oldest first: what the pending sweep and the purge read.
    index("provider_receipts_waiting_idx").on(t.receivedAt, t.eventId).where(sql`${t.appliedAt} is null`),
    // A channel's receipts, applied or not: whether a delivery was confirmed (channel fallback).
    index("provider_receipts_message_idx").on(t.providerId, t.provider),
  ],
);

/** A step of a fallback chain that was taken: when, from which channel, to which, and why. */
export interface TakenFallback {
  at: string;
  from: string;
  to: string;
  because: FallbackCondition;
}

/**
 * A notification's channel fallback chain (the request's `fallback`), written with the
 * notification, and where it stands: the channel the next step watches, when that step's wait
 * for a receipt ends, the steps taken. A step is taken by moving `next_step` on by compare-and-set
 * in the transaction that inserts the next channel, so it is taken once whatever crashes or runs
 * twice; `done_at` is set when the chain ends.
 */
export const notificationFallbacks = pgTable(
  "notification_fallbacks",
  {
    notificationId: text("notification_id").primaryKey(),
    steps: jsonb("steps").$type<FallbackStep[]>().notNull(),
    nextStep: integer("next_step").notNull().default(0),
    watching: text("watching").notNull(),
    /** When the next step's wait for a receipt ends; set once the watched channel was sent. */
    confirmBy: timestamp("confirm_by", { withTimezone: true, mode: "date" }),
    taken: jsonb("taken").$type<TakenFallback[]>().notNull().default([]),
    doneAt: timestamp("done_at", { withTimezone: true, mode: "date" }),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    /** The notification's user: see notification_channels.user_id. */
    userId: text("user_id"),
  },
  (t) => [index("notification_fallbacks_open_idx").on(t.createdAt).where(sql`${t.doneAt} is null`)],
);
