import {
  type Database,
  type InboxFilter,
  type InboxItem,
  latestInboxItemId,
  listInboxItems,
  listInboxItemsAfter,
  setInboxItemState,
} from "@notify/db";

export { INBOX_FILTERS, type InboxFilter, type InboxItem } from "@notify/db";

/** Newest first (the id is the unique total order); `beforeId` continues after a page. */
export const listInbox = (
  database: Database,
  userId: string,
  filter: InboxFilter,
  limit: number,
  beforeId: number | null,
): Promise<{ items: InboxItem[]; hasMore: boolean }> => listInboxItems(database, userId, filter, limit, beforeId);

/** Items after the one a stream sent last, oldest first: what a reconnecting client missed. */
export const inboxAfter = (database: Database, userId: string, afterId: number, limit: number): Promise<InboxItem[]> =>
  listInboxItemsAfter(database, userId, afterId, limit);

export const latestInboxId = (database: Database, userId: string): Promise<number> =>
  latestInboxItemId(database, userId);

/**
 * Sets or clears the user's states of one item. Seen and read are set once (the first time
 * counts) and cleared with false; null when the item is not this user's.
 */
export const updateInboxItem = (
  database: Database,
  userId: string,
  id: number,
  change: { seen?: boolean; read?: boolean; archived?: boolean },
): Promise<InboxItem | null> => setInboxItemState(database, userId, id, change);
