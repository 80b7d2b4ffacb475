import type { Database } from "../pool.js";
import type { Row } from "../rows.js";
import { INBOX_NOTIFY_CHANNEL, INBOX_STATE_NOTIFY_CHANNEL, type inboxItems } from "../schema/index.js";
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
 * counts) and cleared with false; null when the item is not this owner's. A change that moves
 * one of the owner's counts (archived or restored, or read or seen changed on an item not
 * archived) wakes the user's streams in the same statement (INBOX_STATE_NOTIFY_CHANNEL); a
 * repeat, or a change to an archived item's read or seen, wakes none.
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
  // The row is locked before it is read, so `was_*` are the states this update replaces. Locked
  // in the UPDATE's own FROM, never in a CTE (lockChannelKeys, lock-order.ts, says why).
  const [row] = await sql<ItemRow[]>`
    with item as (
      -- Its notification, the partition key (drizzle/0031): the lookups below, by it as a value
      -- (a subquery run once), reach the item's partition alone, where a join would read every
      -- partition.
      select notification_id from inbox_items where id = ${id} and user_id = ${owner.userId} and client_id = ${owner.clientId}
    ), updated as (
      update inbox_items set
        seen_at = ${state(change.seen, "seen_at")},
        read_at = ${state(change.read, "read_at")},
        archived_at = ${state(change.archived, "archived_at")}
      from (
        select id as target_id, seen_at is null as was_unseen, read_at is null as was_unread,
               archived_at is null as was_live
        from inbox_items
        where notification_id = (select notification_id from item) and id = ${id}
          and user_id = ${owner.userId} and client_id = ${owner.clientId}
        for no key update
      ) target
      where inbox_items.notification_id = (select notification_id from item) and inbox_items.id = target.target_id
      returning inbox_items.*, target.was_unseen, target.was_unread, target.was_live
    )
    select ${sql.unsafe(COLUMNS)},
      -- Read and seen count only while an item is not archived.
      case when (archived_at is null) <> was_live
          or (was_live and ((seen_at is null) <> was_unseen or (read_at is null) <> was_unread))
        then pg_notify(${INBOX_STATE_NOTIFY_CHANNEL}, user_id) end as notified
    from updated`;
  return row === undefined ? null : toItem(row);
}

/** What an owner's badge shows: items not archived (`total`), and of those the unread and unseen. */
export interface InboxCounts {
  unread: number;
  unseen: number;
  total: number;
}

/**
 * The owner's counts, each from its own partial index alone (inbox_items_live_idx,
 * inbox_items_unread_idx, inbox_items_unseen_idx), without reading an item.
 */
export async function countInboxItems(database: Database, owner: InboxOwner): Promise<InboxCounts> {
  const { sql } = database;
  const mine = sql`user_id = ${owner.userId} and client_id = ${owner.clientId} and archived_at is null`;
  const [row] = await sql<InboxCounts[]>`
    select
      (select count(*) from inbox_items where ${mine} and read_at is null)::int as unread,
      (select count(*) from inbox_items where ${mine} and seen_at is null)::int as unseen,
      (select count(*) from inbox_items where ${mine})::int as total`;
  return { unread: row?.unread ?? 0, unseen: row?.unseen ?? 0, total: row?.total ?? 0 };
}

export const INBOX_MARK_ACTIONS = ["read", "seen", "archived"] as const;
export type InboxMarkAction = (typeof INBOX_MARK_ACTIONS)[number];

const MARKED_COLUMN: Record<InboxMarkAction, string> = { read: "read_at", seen: "seen_at", archived: "archived_at" };

/**
 * Marks every item of the owner's inbox (not archived) read, seen or archived in one statement,
 * up to and including `upToId` when given (items stored after it are left as they are). Items
 * already in that state keep their first time. Each row is locked, in id order, before it is
 * written, so two of these (or one and an item's update) never wait for each other in a cycle.
 * Wakes the user's streams (INBOX_STATE_NOTIFY_CHANNEL) when it changed any; answers how many.
 */
export async function markAllInboxItems(
  database: Database,
  owner: InboxOwner,
  action: InboxMarkAction,
  upToId: number | null,
): Promise<number> {
  const { sql } = database;
  const column = sql.unsafe(MARKED_COLUMN[action]);
  const [row] = await sql<{ changed: number }[]>`
    with updated as (
      -- The owner's items of each partition (drizzle/0031) read through its index, whichever way
      -- the planner joins them to the targets, locked in the UPDATE's own FROM (never in a CTE:
      -- lockChannelKeys, lock-order.ts, says why).
      update inbox_items set ${column} = now()
      from (
        select id, notification_id from inbox_items
        where user_id = ${owner.userId} and client_id = ${owner.clientId} and archived_at is null
          and ${column} is null ${upToId === null ? sql`` : sql`and id <= ${upToId}`}
        order by id
        for no key update
      ) target
      where inbox_items.user_id = ${owner.userId} and inbox_items.client_id = ${owner.clientId}
        and inbox_items.notification_id = target.notification_id and inbox_items.id = target.id
      returning inbox_items.id
    )
    select (select count(*) from updated)::int as changed,
      (select pg_notify(${INBOX_STATE_NOTIFY_CHANNEL}, ${owner.userId}) where exists (select 1 from updated)) as notified`;
  return row?.changed ?? 0;
}

/**
 * The categories the client has sent the user lately: those of its newest `recent`
 * notifications to the user and of its newest `recent` inbox items, in code-point order.
 */
export async function recentInboxCategories(database: Database, owner: InboxOwner, recent: number): Promise<string[]> {
  const rows = await database.sql<{ category: string }[]>`
    select category collate "C" as category from (
      (select category from notifications where user_id = ${owner.userId} and client_id = ${owner.clientId}
        order by created_at desc limit ${recent})
      union
      (select category from inbox_items where user_id = ${owner.userId} and client_id = ${owner.clientId}
        order by id desc limit ${recent})
    ) recent order by 1`;
  return rows.map((r) => r.category);
}

/**
 * LISTENs for stored items (storeInboxItem notifies in the same statement as its insert) and
 * calls `wake` with the user id of each; resolves once listening, with the way to stop.
 * `listening` runs each time the LISTEN is in place, the first time and after each reconnect
 * (notifications sent while it was gone are lost).
 */
export async function listenForInboxItems(
  database: Database,
  wake: (userId: string) => void,
  listening?: () => void,
): Promise<{ unlisten(): Promise<void> }> {
  return database.sql.listen(INBOX_NOTIFY_CHANNEL, wake, listening);
}

/**
 * LISTENs for changes of items' states (setInboxItemState and markAllInboxItems notify in the
 * same statement as their update) and calls `wake` with the user id of each; as
 * listenForInboxItems otherwise.
 */
export async function listenForInboxStates(
  database: Database,
  wake: (userId: string) => void,
  listening?: () => void,
): Promise<{ unlisten(): Promise<void> }> {
  return database.sql.listen(INBOX_STATE_NOTIFY_CHANNEL, wake, listening);
}
