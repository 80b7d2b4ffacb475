import { sql } from "drizzle-orm";
import { bigint, index, integer, pgSequence, pgTable, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";

/** The inbox items' ids (see inboxItems.id). */
export const inboxItemIds = pgSequence("inbox_items_id_seq");

/**
 * The in-app inbox: one item per notification delivered in-app. `id` is a sequence, so it
 * orders a user's items, names the SSE event that carried each one (Last-Event-ID resumes
 * after it) and is the cursor's key. read/seen/archived are the user's, set through the API.
 * Partitioned with the notification log by `notification_id` (drizzle/0031): an item is retired
 * (and archived) with its notification's day.
 */
export const inboxItems = pgTable(
  "inbox_items",
  {
    /**
     * From a sequence rather than an identity column: PostgreSQL 15 has no identity columns on a
     * partitioned table. Not a key (a key must include the partition key): the sequence alone
     * makes it unique.
     */
    id: bigint("id", { mode: "number" }).notNull().default(sql`nextval('inbox_items_id_seq')`),
    userId: text("user_id").notNull(),
    /**
     * The client whose notification it is: a user's inbox token, minted by one client, sees only
     * that client's items. An item whose client is null is seen by no token.
     */
    clientId: text("client_id"),
    /** One item per notification: a redelivered work item finds its first one. */
    notificationId: text("notification_id").notNull().unique(),
    category: text("category").notNull(),
    title: text("title"),
    body: text("body").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    seenAt: timestamp("seen_at", { withTimezone: true, mode: "date" }),
    readAt: timestamp("read_at", { withTimezone: true, mode: "date" }),
    archivedAt: timestamp("archived_at", { withTimezone: true, mode: "date" }),
  },
  (t) => [
    // The pollers' highest id and the items after one (inbox/items.ts).
    index("inbox_items_id_idx").on(t.id),
    index("inbox_items_user_client_idx").on(t.userId, t.clientId, t.id),
    // Each view of a user with many items (inbox, archived, unread): without them a page walked
    // every item of the user (or the whole table by id) to find the few it shows, e.g. the inbox
    // of a user who archives everything.
    index("inbox_items_live_idx").on(t.userId, t.clientId, t.id).where(sql`${t.archivedAt} is null`),
    index("inbox_items_archived_idx").on(t.userId, t.clientId, t.id).where(sql`${t.archivedAt} is not null`),
    index("inbox_items_unread_idx")
      .on(t.userId, t.clientId, t.id)
      .where(sql`${t.archivedAt} is null and ${t.readAt} is null`),
    // The unseen count (GET /inbox/counts, the stream's counts event): the live and unread
    // indexes answer the other two counts from the index alone; without this one the unseen
    // count read every live item of the user from the table.
    index("inbox_items_unseen_idx")
      .on(t.userId, t.clientId, t.id)
      .where(sql`${t.archivedAt} is null and ${t.seenAt} is null`),
  ],
);

/**
 * Opaque per-user inbox tokens: `ntu_` and random bytes, without the signature of the tokens the
 * API mints (libs/core credentials.ts). Each works until it expires, looked up by its SHA-256
 * (all that is kept).
 */
export const inboxTokens = pgTable(
  "inbox_tokens",
  {
    tokenHash: text("token_hash").primaryKey(),
    userId: text("user_id").notNull(),
    clientId: text("client_id").notNull(),
    /**
     * The API key that minted it: the token works only while that key does (revoked, or past a
     * rotation's grace, ends it). A token whose key is null names no key and does not work.
     */
    keyId: text("key_id"),
    expiresAt: timestamp("expires_at", { withTimezone: true, mode: "date" }).notNull(),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [index("inbox_tokens_expires_idx").on(t.expiresAt)],
);

/**
 * Inbox tokens revoked before their expiry. Tokens are self-contained (a MAC over user, client,
 * minting key, token id and expiry), so a revocation is a row every ingest instance holds in
 * memory: one token by `token_id` (one row per token), or, with `token_id` null, every token of
 * the user from that client issued at or before `revoked_at` (one row per user of a client, moved
 * forward by each revocation). A row is needed only until the last token it covers expires
 * (`expires_at`: a token's issue plus the longest lifetime, a user's `revoked_at` plus it), then
 * it is purged. How many rows a client holds is counted in `inbox_token_revocation_counts`.
 */
export const inboxTokenRevocations = pgTable(
  "inbox_token_revocations",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    clientId: text("client_id").notNull(),
    userId: text("user_id").notNull(),
    tokenId: text("token_id"),
    revokedAt: timestamp("revoked_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
    expiresAt: timestamp("expires_at", { withTimezone: true, mode: "date" }).notNull(),
  },
  (t) => [
    index("inbox_token_revocations_expires_idx").on(t.expiresAt),
    uniqueIndex("inbox_token_revocations_token_idx")
      .on(t.clientId, t.userId, t.tokenId)
      .where(sql`${t.tokenId} is not null`),
    uniqueIndex("inbox_token_revocations_user_idx").on(t.clientId, t.userId).where(sql`${t.tokenId} is null`),
  ],
);

/**
 * How many rows of `inbox_token_revocations` each client holds: a revocation that adds a row
 * takes one (refused at the client's cap), the purge gives back those it deletes. Every ingest
 * instance holds each row in memory, so this bounds that memory by clients times the cap.
 */
export const inboxTokenRevocationCounts = pgTable("inbox_token_revocation_counts", {
  clientId: text("client_id").primaryKey(),
  held: integer("held").notNull(),
});

/** The Postgres channel that wakes the gateway's streams; the payload is the user id. */
export const INBOX_NOTIFY_CHANNEL = "notify_inbox";

/**
 * The Postgres channel that tells the gateway's streams a user's counts changed (an item marked
 * seen, read or archived, or the reverse); the payload is the user id. Apart from
 * INBOX_NOTIFY_CHANNEL, so that a change of state costs a stream a count and never a read of its
 * items.
 */
export const INBOX_STATE_NOTIFY_CHANNEL = "notify_inbox_state";
