import { sql } from "drizzle-orm";
import { bigint, index, integer, jsonb, pgTable, primaryKey, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";

/** A stored set of user ids, the target of broadcasts. */
export const audiences = pgTable("audiences", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  /**
   * Its members, kept by statement triggers on audience_members (migration 0015) for whoever
   * writes them: counting them took seconds at millions, on every broadcast and every read.
   */
  memberCount: bigint("member_count", { mode: "number" }).notNull().default(0),
  createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  updatedAt: timestamp("updated_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
});

/**
 * One row per member. The primary key orders an audience's members by user id: the order a
 * broadcast walks them in, so its stored cursor (the last user id expanded) says exactly where
 * to resume.
 */
export const audienceMembers = pgTable(
  "audience_members",
  {
    audienceId: text("audience_id")
      .notNull()
      .references(() => audiences.id, { onDelete: "cascade" }),
    userId: text("user_id").notNull(),
    addedAt: timestamp("added_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.audienceId, t.userId] })],
);

/**
 * A promotional notification for every member of an audience, expanded in batches by the
 * processor. `cursor` is the last user id expanded, committed in the same transaction as the
 * batch's notifications, so an expander that dies resumes after it: no gap and no duplicate.
 */
export const broadcasts = pgTable(
  "broadcasts",
  {
    id: text("id").primaryKey(),
    clientId: text("client_id").notNull(),
    dedupKey: text("dedup_key").notNull(),
    /** SHA-256 of the canonical request: a reused Idempotency-Key with another body is a 422. */
    requestHash: text("request_hash").notNull(),
    audienceId: text("audience_id")
      .notNull()
      .references(() => audiences.id),
    category: text("category").notNull(),
    templateId: text("template_id").notNull(),
    templateVersion: integer("template_version"),
    requestedChannels: text("requested_channels").array(),
    data: jsonb("data").notNull(),
    /** expanding → expanded, or cancelled; expanding ⇄ paused (no batch is taken while paused), paused → cancelled. */
    status: text("status").notNull(),
    /** Members when the broadcast was accepted; members added later are expanded too. */
    total: bigint("total", { mode: "number" }).notNull(),
    expanded: bigint("expanded", { mode: "number" }).notNull().default(0),
    cursor: text("cursor"),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    finishedAt: timestamp("finished_at", { withTimezone: true, mode: "date" }),
  },
  (t) => [
    uniqueIndex("broadcasts_client_dedup_idx").on(t.clientId, t.dedupKey),
    index("broadcasts_expanding_idx").on(t.createdAt).where(sql`${t.status} = 'expanding'`),
  ],
);

/**
 * Who a broadcast reached: one notification per (broadcast, user), held by the expander's cursor
 * (moved in the statement that writes the batch). Partitioned with the notification log by
 * `notification_id` (drizzle/0031), whose key is the only unique one: a key must include the
 * partition key. Retired with its notification's day and not archived (the notification's dedup
 * key, `broadcast:<id>:<user>`, says which broadcast it was for).
 *
 * `broadcast_id` has no foreign key: only the expander writes these rows, a batch at a time,
 * in the transaction that holds its broadcast's row FOR UPDATE, so the broadcast exists by
 * construction, while a key's check would cost Postgres one trigger query per recipient, a large
 * share of the expansion's insert time. Broadcasts are never deleted; whoever deletes one by hand
 * deletes its recipient rows too.
 */
export const broadcastRecipients = pgTable(
  "broadcast_recipients",
  {
    broadcastId: text("broadcast_id").notNull(),
    userId: text("user_id").notNull(),
    notificationId: text("notification_id").notNull(),
  },
  (t) => [
    // A broadcast's recipients in its members' order: its progress and tallies.
    index("broadcast_recipients_broadcast_idx").on(t.broadcastId, t.userId),
    uniqueIndex("broadcast_recipients_notification_idx").on(t.notificationId),
  ],
);

/**
 * A broadcast's last count of its recipients' outcomes (readBroadcastProgress): counting reads
 * every recipient's channels, seconds for a million, so a count is kept and read again only once
 * it is ten times as old as it took to make.
 *
 * `broadcast_id` has no foreign key: its check takes a share lock on the broadcast's row, which
 * the expander holds for update while it writes a batch, so every read of an expanding
 * broadcast's progress would wait a batch (migration 0015). Whoever deletes a broadcast by hand
 * deletes its progress row too.
 */
export const broadcastProgress = pgTable("broadcast_progress", {
  broadcastId: text("broadcast_id").primaryKey(),
  suppressed: bigint("suppressed", { mode: "number" }).notNull(),
  delivered: bigint("delivered", { mode: "number" }).notNull(),
  failed: bigint("failed", { mode: "number" }).notNull(),
  countedAt: timestamp("counted_at", { withTimezone: true, mode: "date" }).notNull(),
  /** How long the count took, in ms. */
  countMs: integer("count_ms").notNull(),
});
