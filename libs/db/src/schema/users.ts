import { bigint, date, index, integer, jsonb, pgTable, primaryKey, text, timestamp } from "drizzle-orm/pg-core";

export interface QuietHours {
  /** "HH:MM", 24-hour, in tz. A window may cross midnight (start > end). */
  start: string;
  end: string;
  /** IANA time zone, e.g. "Europe/London". */
  tz: string;
}

/** A Web Push subscription as the browser's PushSubscription.toJSON() gives it. */
export interface DeviceToken {
  endpoint: string;
  expirationTime?: number | null;
  keys: { p256dh: string; auth: string };
}

/** User preferences. One document per user; absent means the defaults. */
export const userPreferences = pgTable("user_preferences", {
  userId: text("user_id").primaryKey(),
  channelOptout: text("channel_optout").array().notNull().default([]),
  categoryOptout: text("category_optout").array().notNull().default([]),
  quietHours: jsonb("quiet_hours").$type<QuietHours | null>(),
  rateCapPerDay: integer("rate_cap_per_day"),
  deviceTokens: jsonb("device_tokens").$type<DeviceToken[]>().notNull().default([]),
  locale: text("locale"),
  /** IANA time zone: where send_at_local is read; null falls back to the quiet hours' zone. */
  timeZone: text("time_zone"),
  updatedAt: timestamp("updated_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
});

/**
 * Where a user can be reached on the address-based channels. The preference document carries
 * device tokens for push; email and SMS need an address, kept here (a "subscriber" in other
 * platforms' words). In-app needs none: the user id is the address.
 */
export const userContacts = pgTable("user_contacts", {
  userId: text("user_id").primaryKey(),
  email: text("email"),
  phone: text("phone"),
  updatedAt: timestamp("updated_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
});

/**
 * Each change of a user's addresses, with the key (and its client) that made it: an address
 * decides where every client's messages go, one-time passcodes included, so who redirected
 * them must be answerable. Which fields changed, not their values.
 */
export const contactChanges = pgTable(
  "contact_changes",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    userId: text("user_id").notNull(),
    clientId: text("client_id").notNull(),
    keyId: text("key_id").notNull(),
    fields: text("fields").array().notNull(),
    changedAt: timestamp("changed_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [index("contact_changes_user_idx").on(t.userId, t.id)],
);

/**
 * Promotional notifications counted per user per day, the day taken in the user's time zone.
 * The cap check is one conditional upsert, exact under concurrency and across restarts.
 */
export const promotionalDailyCounts = pgTable(
  "promotional_daily_counts",
  {
    userId: text("user_id").notNull(),
    day: date("day", { mode: "string" }).notNull(),
    count: integer("count").notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.userId, t.day] })],
);

/**
 * Promotional notifications held back by quiet hours, due at the end of the window: the
 * processor's durable timer. Its scheduler takes due rows with FOR UPDATE SKIP LOCKED, so
 * several processors share the work and a restart loses nothing. The per-channel status and
 * planned time live on notification_channels (status deferred, next_attempt_at); this table
 * only indexes what is due, so the scheduler never scans the channel log.
 */
export const deferredNotifications = pgTable(
  "deferred_notifications",
  {
    notificationId: text("notification_id").primaryKey(),
    userId: text("user_id").notNull(),
    dueAt: timestamp("due_at", { withTimezone: true, mode: "date" }).notNull(),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [index("deferred_notifications_due_idx").on(t.dueAt, t.notificationId)],
);
