import { sql } from "drizzle-orm";
import { index, integer, pgTable, primaryKey, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";

/**
 * A digest: the notifications of one client, user, template and key collected over a window
 * fixed from the first item (`closes_at`), or until `max_items` have joined, then sent as one
 * notification of their own (`notification_id`). At most one digest per key is open at a time
 * (the partial unique index); a full one is `closed` at once, so the next item opens a new one.
 * open -> closed -> sent, or open -> sent when its window ends; `notification_id` is set in the
 * transaction that sends it, once.
 */
export const digests = pgTable(
  "digests",
  {
    id: text("id").primaryKey(),
    clientId: text("client_id").notNull(),
    userId: text("user_id").notNull(),
    templateId: text("template_id").notNull(),
    key: text("key").notNull(),
    /** open (collecting), closed (full, to be sent), sent. */
    status: text("status").notNull(),
    maxItems: integer("max_items").notNull(),
    itemCount: integer("item_count").notNull().default(0),
    openedAt: timestamp("opened_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    /** When it is sent: the first item's time plus the window, or when it filled up. */
    closesAt: timestamp("closes_at", { withTimezone: true, mode: "date" }).notNull(),
    sentAt: timestamp("sent_at", { withTimezone: true, mode: "date" }),
    /** The digest's own notification, once sent. */
    notificationId: text("notification_id"),
  },
  (t) => [
    uniqueIndex("digests_open_key_idx").on(t.clientId, t.userId, t.templateId, t.key).where(sql`${t.status} = 'open'`),
    index("digests_due_idx").on(t.closesAt, t.id).where(sql`${t.status} <> 'sent'`),
    index("digests_notification_idx").on(t.notificationId),
  ],
);

/** The notifications that joined a digest: each joins exactly one (the primary key). */
export const digestItems = pgTable(
  "digest_items",
  {
    notificationId: text("notification_id").primaryKey(),
    digestId: text("digest_id").notNull(),
    joinedAt: timestamp("joined_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    /** Canceled before its digest was sent: left out of it, and never routed on its own. */
    canceledAt: timestamp("canceled_at", { withTimezone: true, mode: "date" }),
    /** The notification's user: see notification_channels.user_id (schema/notifications.ts). */
    userId: text("user_id"),
  },
  (t) => [index("digest_items_digest_idx").on(t.digestId, t.notificationId)],
);

/**
 * Per-user throttles: one row per notification that took a slot of (client, user, key). A
 * notification is let through when fewer than `limit` rows of its key lie within `per` before
 * it; its row goes in with its channel rows, keyed by the notification, so a redelivery takes
 * no second slot.
 */
export const throttleSlots = pgTable(
  "throttle_slots",
  {
    clientId: text("client_id").notNull(),
    userId: text("user_id").notNull(),
    key: text("key").notNull(),
    notificationId: text("notification_id").notNull(),
    takenAt: timestamp("taken_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.clientId, t.userId, t.key, t.notificationId] }),
    index("throttle_slots_window_idx").on(t.clientId, t.userId, t.key, t.takenAt),
    index("throttle_slots_taken_idx").on(t.takenAt),
  ],
);
