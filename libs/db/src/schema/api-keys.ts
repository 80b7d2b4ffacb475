import { index, integer, pgTable, text, timestamp } from "drizzle-orm/pg-core";

/**
 * API keys identify a client application. Only the SHA-256 of a key is stored; `prefix` is the
 * key's first characters, shown in listings so an operator can tell keys apart.
 */
export const apiKeys = pgTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    clientId: text("client_id").notNull(),
    name: text("name").notNull(),
    prefix: text("prefix").notNull(),
    keyHash: text("key_hash").notNull().unique(),
    scopes: text("scopes").array().notNull(),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    /** Revocation time; a future time is a rotation grace period (the key works until then). */
    revokedAt: timestamp("revoked_at", { withTimezone: true, mode: "date" }),
    /** Inbound leaky bucket of this key (null: the service defaults): queue size and outflow rate. */
    rateLimitBurst: integer("rate_limit_burst"),
    rateLimitPerSecond: integer("rate_limit_per_second"),
    lastUsedAt: timestamp("last_used_at", { withTimezone: true, mode: "date" }),
  },
  (t) => [index("api_keys_client_idx").on(t.clientId)],
);
