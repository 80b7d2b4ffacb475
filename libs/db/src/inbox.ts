import type { Database } from "./pool.js";
import type { Row } from "./rows.js";
import { INBOX_NOTIFY_CHANNEL, type inboxItems } from "./schema/index.js";

// The in-app inbox as its API reads it: the opaque tokens of the format before signed ones, the
// revocations of signed tokens, items and their states, and the wake-ups of open streams.

/**
 * Whose inbox a token opens: one user's items from one client (the client whose key minted the
 * token). Every inbox query is confined to both.
 */
export interface InboxOwner {
  userId: string;
  clientId: string;
}

/**
 * Stores an opaque token's SHA-256 for the user, minted by `keyId` of `clientId`, valid until
 * `expiresAt`: the format before signed tokens (libs/core credentials.ts), which the API no
 * longer mints; such tokens work until they expire.
 */
export async function insertInboxToken(
  database: Database,
  token: { tokenHash: string; userId: string; clientId: string; keyId: string; expiresAt: Date },
): Promise<void> {
  await database.sql`insert into inbox_tokens (token_hash, user_id, client_id, key_id, expires_at)
    values (${token.tokenHash}, ${token.userId}, ${token.clientId}, ${token.keyId}, ${token.expiresAt})`;
}

/** What an opaque token opens, and what a stream of it re-checks: its key, its issue and its expiry. */
export interface StoredInboxToken extends InboxOwner {
  keyId: string;
  createdAt: Date;
  expiresAt: Date;
}

/**
 * The opaque token with this SHA-256, unexpired, while the key that minted it still works (not
 * revoked, or within a rotation's grace); null otherwise.
 */
export async function findInboxTokenOwner(database: Database, tokenHash: string): Promise<StoredInboxToken | null> {
  const [row] = await database.sql<
    { user_id: string; client_id: string; key_id: string; created_at: Date; expires_at: Date }[]
  >`
    select t.user_id, t.client_id, t.key_id, t.created_at, t.expires_at from inbox_tokens t
    join api_keys k on k.id = t.key_id and k.client_id = t.client_id
    where t.token_hash = ${tokenHash} and t.expires_at > now()
      and (k.revoked_at is null or k.revoked_at > now())`;
  return row === undefined
    ? null
    : {
        userId: row.user_id,
        clientId: row.client_id,
        keyId: row.key_id,
        createdAt: row.created_at,
        expiresAt: row.expires_at,
      };
}

/** Deletes tokens that expired more than `graceMs` ago (they no longer open anything); answers how many. */
export async function purgeExpiredInboxTokens(database: Database, graceMs = 0): Promise<number> {
  const rows = await database.sql`
    delete from inbox_tokens where expires_at < now() - ${`${graceMs} milliseconds`}::interval returning 1`;
  return rows.length;
}

/**
 * A revocation of inbox tokens: one token of the user from the client (`tokenId`), or, with
 * `tokenId` null, every one of them issued up to `revokedAt`.
 */
export interface InboxTokenRevocation {
  clientId: string;
  userId: string;
  tokenId: string | null;
  revokedAt: Date;
}

/** What storing a revocation did: added a row, found one (moved forward for a user's), or met the client's cap. */
export type RevocationStored = "added" | "known" | "full";

/** Thrown inside the transaction to undo a row the client's cap has no room for. */
class CapReached extends Error {}

/**
 * Records a revocation, kept until `expiresAt` (when the last token it covers has expired): one
 * row per token, and one per user of a client, whose `revoked_at` and `expires_at` only move
 * forward. A row it adds takes one of the client's `perClient` (inbox_token_revocation_counts;
 * the row lock on the client's count serialises them): with none left nothing is stored
 * ("full"). Revoking all of a user's tokens also deletes the user's opaque tokens of that client
 * (all minted before now: none is minted any more), which are looked up rather than checked
 * against the revocations. One transaction.
 */
export async function insertInboxTokenRevocation(
  database: Database,
  revocation: InboxTokenRevocation & { expiresAt: Date },
  perClient: number,
): Promise<RevocationStored> {
  const { clientId, userId, tokenId, revokedAt, expiresAt } = revocation;
  try {
    return await database.sql.begin(async (sql) => {
      const rows =
        tokenId === null
          ? await sql<{ added: boolean }[]>`
              insert into inbox_token_revocations (client_id, user_id, token_id, revoked_at, expires_at)
              values (${clientId}, ${userId}, null, ${revokedAt}, ${expiresAt})
              on conflict (client_id, user_id) where token_id is null do update set
                revoked_at = greatest(inbox_token_revocations.revoked_at, excluded.revoked_at),
                expires_at = greatest(inbox_token_revocations.expires_at, excluded.expires_at)
              returning xmax = 0 as added`
          : await sql<{ added: boolean }[]>`
              insert into inbox_token_revocations (client_id, user_id, token_id, revoked_at, expires_at)
              values (${clientId}, ${userId}, ${tokenId}, ${revokedAt}, ${expiresAt})
              on conflict (client_id, user_id, token_id) where token_id is not null do nothing
              returning true as added`;
      const added = rows[0]?.added === true;
      if (added) {
        const taken = await sql`
          insert into inbox_token_revocation_counts (client_id, held) values (${clientId}, 1)
          on conflict (client_id) do update set held = inbox_token_revocation_counts.held + 1
            where inbox_token_revocation_counts.held < ${perClient}
          returning held`;
        if (taken.length === 0 || perClient < 1) throw new CapReached();
      }
      if (tokenId === null) await sql`delete from inbox_tokens where client_id = ${clientId} and user_id = ${userId}`;
      return added ? "added" : "known";
    });
  } catch (error) {
    if (error instanceof CapReached) return "full";
    throw error;
  }
}

/** How many revocation rows a client holds (what its cap counts). */
export async function countInboxTokenRevocations(database: Database, clientId: string): Promise<number> {
  const [row] = await database.sql<{ held: number }[]>`
    select held from inbox_token_revocation_counts where client_id = ${clientId}`;
  return row?.held ?? 0;
}

/**
 * The revocations still in force (their tokens may not all have expired); with `since`, only
 * those revoked after it, for a reader that holds the earlier ones.
 */
export async function listInboxTokenRevocations(
  database: Database,
  since: Date | null = null,
): Promise<(InboxTokenRevocation & { expiresAt: Date })[]> {
  const { sql } = database;
  const rows = await sql<
    { client_id: string; user_id: string; token_id: string | null; revoked_at: Date; expires_at: Date }[]
  >`
    select client_id, user_id, token_id, revoked_at, expires_at from inbox_token_revocations
    where expires_at > now() ${since === null ? sql`` : sql`and revoked_at > ${since}`}`;
  return rows.map((row) => ({
    clientId: row.client_id,
    userId: row.user_id,
    tokenId: row.token_id,
    revokedAt: row.revoked_at,
    expiresAt: row.expires_at,
  }));
}

/**
 * Deletes revocations whose tokens have all expired and gives their clients the rows back (in
 * the same statement); answers how many.
 */
export async function purgeExpiredInboxTokenRevocations(database: Database): Promise<number> {
  const [row] = await database.sql<{ purged: number }[]>`
    with purged as (
      delete from inbox_token_revocations where expires_at < now() returning client_id
    ), freed as (
      update inbox_token_revocation_counts c set held = greatest(c.held - p.rows, 0)
      from (select client_id, count(*)::int as rows from purged group by client_id) p
      where c.client_id = p.client_id
    )
    select count(*)::int as purged from purged`;
  return row?.purged ?? 0;
}

export const INBOX_FILTERS = ["inbox", "unread", "archived", "all"] as const;
export type InboxFilter = (typeof INBOX_FILTERS)[number];

export interface InboxItem {
  id: string;
  notification_id: string;
  category: string;
  title: string | null;
  body: string;
  created_at: string;
  seen_at: string | null;
  read_at: string | null;
  archived_at: string | null;
}

/** postgres.js returns the bigint id as text. */
type ItemRow = Omit<Row<typeof inboxItems>, "id" | "user_id" | "client_id"> & { id: string };

const toItem = (row: ItemRow): InboxItem => ({
  id: String(row.id),
  notification_id: row.notification_id,
  category: row.category,
  title: row.title,
  body: row.body,
  created_at: row.created_at.toISOString(),
  seen_at: row.seen_at?.toISOString() ?? null,
  read_at: row.read_at?.toISOString() ?? null,
  archived_at: row.archived_at?.toISOString() ?? null,
});

const COLUMNS = "id, notification_id, category, title, body, created_at, seen_at, read_at, archived_at";

/** Newest first (the id is the unique total order); `beforeId` continues after a page. */
export async function listInboxItems(
  database: Database,
  owner: InboxOwner,
  filter: InboxFilter,
  limit: number,
  beforeId: number | null,
): Promise<{ items: InboxItem[]; hasMore: boolean }> {
  const { sql } = database;
  const where = {
    inbox: sql`and archived_at is null`,
    unread: sql`and archived_at is null and read_at is null`,
    archived: sql`and archived_at is not null`,
    all: sql``,
  }[filter];
  const rows = await sql<ItemRow[]>`
    select ${sql.unsafe(COLUMNS)} from inbox_items
    where user_id = ${owner.userId} and client_id = ${owner.clientId} ${where} ${beforeId === null ? sql`` : sql`and id < ${beforeId}`}
    order by id desc limit ${limit + 1}`;
  return { items: rows.slice(0, limit).map(toItem), hasMore: rows.length > limit };
}

/** Items after the one a stream sent last, oldest first: what a reconnecting client missed. */
export async function listInboxItemsAfter(
  database: Database,
  owner: InboxOwner,
  afterId: number,
  limit: number,
): Promise<InboxItem[]> {
  const rows = await database.sql<ItemRow[]>`
    select ${database.sql.unsafe(COLUMNS)} from inbox_items
    where user_id = ${owner.userId} and client_id = ${owner.clientId} and id > ${afterId}
    order by id limit ${limit}`;
  return rows.map(toItem);
}

/** The id of the owner's newest item; 0 when there is none. */
export async function latestInboxItemId(database: Database, owner: InboxOwner): Promise<number> {
  const [row] = await database.sql<{ id: string | null }[]>`
    select max(id) as id from inbox_items where user_id = ${owner.userId} and client_id = ${owner.clientId}`;
  return Number(row?.id ?? 0);
}

/**
 * For the streams of one process, in one statement: the id of the newest item stored (`top`,
 * null when there is none after `afterId`), and which of `userIds` got items after `afterId`.
 * With `afterId` null, only `top` (where a poller starts).
 */
export async function inboxItemsSince(
  database: Database,
  afterId: number | null,
  userIds: readonly string[],
): Promise<{ top: number | null; userIds: string[] }> {
  const { sql } = database;
  if (afterId === null) {
    const [row] = await sql<{ top: string | null }[]>`select max(id) as top from inbox_items`;
    return { top: row?.top == null ? null : Number(row.top), userIds: [] };
  }
  const [row] = await sql<{ top: string | null; users: string[] | null }[]>`
    select max(id) as top, array_agg(distinct user_id) filter (where user_id = any(${userIds as string[]}::text[])) as users
    from inbox_items where id > ${afterId}`;
  return { top: row?.top == null ? null : Number(row.top), userIds: row?.users ?? [] };
}

/**
 * Sets or clears the user's states of one item. Seen and read are set once (the first time
 * counts) and cleared with false; null when the item is not this owner's.
 */
export async function setInboxItemState(
  database: Database,
  owner: InboxOwner,
  id: number,
  change: { seen?: boolean; read?: boolean; archived?: boolean },
): Promise<InboxItem | null> {
  const { sql } = database;
  const state = (value: boolean | undefined, column: string) =>
    value === undefined ? sql.unsafe(column) : value ? sql`coalesce(${sql.unsafe(column)}, now())` : sql`null`;
  const [row] = await sql<ItemRow[]>`
    update inbox_items set
      seen_at = ${state(change.seen, "seen_at")},
      read_at = ${state(change.read, "read_at")},
      archived_at = ${state(change.archived, "archived_at")}
    where id = ${id} and user_id = ${owner.userId} and client_id = ${owner.clientId}
    returning ${sql.unsafe(COLUMNS)}`;
  return row === undefined ? null : toItem(row);
}

/**
 * LISTENs for stored items (storeInboxItem notifies in the same statement as its insert) and
 * calls `wake` with the user id of each; resolves once listening, with the way to stop.
 */
export async function listenForInboxItems(
  database: Database,
  wake: (userId: string) => void,
): Promise<{ unlisten(): Promise<void> }> {
  return database.sql.listen(INBOX_NOTIFY_CHANNEL, wake);
}
