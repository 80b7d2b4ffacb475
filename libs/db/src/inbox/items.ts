import type { Database } from "../pool.js";
import type { Row } from "../rows.js";
import { INBOX_NOTIFY_CHANNEL, type inboxItems } from "../schema/index.js";
import type { InboxOwner } from "./tokens.js";

// The in-app inbox's items as its API reads and changes them, and the wake-ups of open streams.
// The worker stores them (delivery/in-app.ts).

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
