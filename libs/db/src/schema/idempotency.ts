import { index, pgTable, primaryKey, text, timestamp } from "drizzle-orm/pg-core";

/**
 * The 24 h idempotency guard, one row per (client, key). It lives
 * in Postgres because ingest already commits there: claiming the key is part of the same
 * multi-row insert, with no extra round trip. The request is still in flight while its
 * notification is listed in `publish_outbox`; a row older than the window is taken over by a
 * new request, and the purge job deletes expired rows.
 */
export const idempotencyKeys = pgTable(
  "idempotency_keys",
  {
    clientId: text("client_id").notNull(),
    key: text("key").notNull(),
    requestHash: text("request_hash").notNull(),
    notificationId: text("notification_id").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.clientId, t.key] }), index("idempotency_keys_created_idx").on(t.createdAt)],
);
