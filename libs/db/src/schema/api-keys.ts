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
    /**
     * The key that minted this one through the API (null: minted by the CLI or the setup). A
     * revocation reaches every key minted from the revoked one, so a key cannot outlive its
     * minter through keys it made for itself.
     */
    mintedBy: text("minted_by"),
  },
  (t) => [index("api_keys_client_idx").on(t.clientId), index("api_keys_minted_by_idx").on(t.mintedBy)],
);

/**
 * Secrets of the deployment, shared by every process through the database: `credentials` keys
 * the MAC that API keys and inbox tokens carry, so a forged or mistyped credential is refused
 * without a lookup. Created at first use; whoever can read this table is an operator anyway.
 */
export const deploymentSecrets = pgTable("deployment_secrets", {
  name: text("name").primaryKey(),
  secret: text("secret").notNull(),
  createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
});
