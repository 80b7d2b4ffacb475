import { index, pgTable, primaryKey, text, timestamp } from "drizzle-orm/pg-core";

/**
 * The idempotency guard of accepted requests, partitioned by day (drizzle/0030_idempotency_slots.sql).
 * It lives in Postgres because ingest already commits there: claiming the key is part of the same
 * multi-row insert, with no extra round trip. A claim writes one row per UTC day its window
 * overlaps (`slot`: the start of the day; two for a 24 h window), and a claim or a read looks in
 * its own day's slot alone, where every claim still in the window has a row. The request is still
 * in flight while its notification is listed in `publish_outbox`; a row older than the window is
 * taken over by a new request. A day's partition is dropped once the day has passed (the
 * processor's leader makes them ahead and drops them); nothing deletes rows but the release of a
 * failed publish and the purge of the default partition's few.
 */
export const idempotencyKeys = pgTable(
  "idempotency_keys",
  {
    clientId: text("client_id").notNull(),
    key: text("key").notNull(),
    slot: timestamp("slot", { withTimezone: true, mode: "date" }).notNull(),
    requestHash: text("request_hash").notNull(),
    notificationId: text("notification_id").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.clientId, t.key, t.slot] })],
);

/**
 * The guard's records from before it was partitioned, one row per (client, key), under their own
 * key. Nothing writes here any more: claims and reads consult it (a record younger than the window
 * still holds its key), and the processor's job empties it once its newest record is past the
 * window. Kept, empty, so that the statements naming it need no second release.
 */
export const idempotencyKeysLegacy = pgTable(
  "idempotency_keys_legacy",
  {
    clientId: text("client_id").notNull(),
    key: text("key").notNull(),
    requestHash: text("request_hash").notNull(),
    notificationId: text("notification_id").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ name: "idempotency_keys_legacy_client_id_key_pk", columns: [t.clientId, t.key] }),
    index("idempotency_keys_legacy_created_idx").on(t.createdAt),
  ],
);
