import type { InboxClient } from "./client.js";
import { compareIds } from "./ids.js";
import type { ConnectionState, InboxCounts, InboxFilter, InboxItem, InboxItemChange, MarkAllAction } from "./types.js";

export interface InboxFeedState {
  /** The loaded items of the feed's filter, newest first, each once, with the marks not yet answered applied. */
  items: InboxItem[];
  /** The server's counts with the marks not yet reflected in them applied; null until first read. */
  counts: InboxCounts | null;
  hasMore: boolean;
  /** A page is being read. */
  loading: boolean;
  connection: ConnectionState;
  /** The latest failure: a page, a mark (rolled back), or the connection closing for good. */
  error: Error | null;
}

export interface InboxFeed {
  readonly state: InboxFeedState;
  /** Calls `listener` at once with the state, then after every change; returns the unsubscribe. */
  subscribe(listener: (state: InboxFeedState) => void): () => void;
  /** Reads the first page and the counts, then opens the live connection. */
  start(): Promise<void>;
  /** Reads the next page (by cursor), adding only items not there yet. */
  loadMore(): Promise<void>;
  markRead(id: string, read?: boolean): Promise<void>;
  markSeen(id: string): Promise<void>;
  archive(id: string, archived?: boolean): Promise<void>;
  markAllRead(): Promise<void>;
  markAllSeen(): Promise<void>;
  archiveAll(): Promise<void>;
  /** Closes the live connection; the state stays as it is. */
  stop(): void;
}

/** A mark not yet answered: what it sets, on which items. */
interface Change {
  covers(item: InboxItem): boolean;
  set: InboxItemChange;
  at: string;
}

/** What a mark moves the counts by, until counts read after its answer include it. */
interface Delta {
  by: InboxCounts;
  /** When its answer came (a tick of the feed's clock); null while it is pending. */
  settled: number | null;
}

/**
 * Whether counts read from the server since `readFrom` (a tick of the feed's clock) can stand for
 * the marks outstanding now: only if every one of them was answered before the read began. A mark
 * sent or answered during the read may or may not be in what it answered.
 */
const readCovers = (deltas: readonly Delta[], readFrom: number, own?: Delta): boolean =>
  deltas.every((delta) => delta === own || (delta.settled !== null && delta.settled < readFrom));

const ZERO: InboxCounts = { unread: 0, unseen: 0, total: 0 };

/** What one item adds to the counts: the inbox (not archived) items, unread and unseen among them. */
export function countsOf(item: InboxItem | undefined): InboxCounts {
  if (item === undefined || item.archived_at !== null) return ZERO;
  return { unread: item.read_at === null ? 1 : 0, unseen: item.seen_at === null ? 1 : 0, total: 1 };
}

const add = (a: InboxCounts, b: InboxCounts, sign = 1): InboxCounts => ({
  unread: a.unread + sign * b.unread,
  unseen: a.unseen + sign * b.unseen,
  total: a.total + sign * b.total,
});

/** Whether an item belongs in a list of this filter, as the server's list decides. */
export function inFilter(item: InboxItem, filter: InboxFilter): boolean {
  switch (filter) {
    case "inbox":
      return item.archived_at === null;
    case "unread":
      return item.archived_at === null && item.read_at === null;
    case "archived":
      return item.archived_at !== null;
    default:
      return true;
  }
}

/** `item` with `set` applied: true sets a state (an earlier time is kept), false clears it. */
export function applyChange(item: InboxItem, set: InboxItemChange, at: string): InboxItem {
  const next = { ...item };
  if (set.read !== undefined) next.read_at = set.read ? (item.read_at ?? at) : null;
  if (set.seen !== undefined) next.seen_at = set.seen ? (item.seen_at ?? at) : null;
  if (set.archived !== undefined) next.archived_at = set.archived ? (item.archived_at ?? at) : null;
  return next;
}

const MARK_ALL_SETS: Record<MarkAllAction, InboxItemChange> = {
  read: { read: true },
  seen: { seen: true },
  archived: { archived: true },
};

/** The counts once a mark-all of `action` has applied to every item: what it sets to zero. */
const afterMarkAll = (counts: InboxCounts, action: MarkAllAction): InboxCounts =>
  action === "read"
    ? { ...counts, unread: 0 }
    : action === "seen"
      ? { ...counts, unseen: 0 }
      : { unread: 0, unseen: 0, total: 0 };

/**
 * A live, paged view of one filter of the user's inbox over an InboxClient: the first page and
 * the counts, more pages on demand, new items from the stream put first, and marks applied at
 * once, sent, and either confirmed by the server's answer or rolled back.
 */
export function createInboxFeed(
  client: InboxClient,
  options: { filter?: InboxFilter; pageSize?: number } = {},
): InboxFeed {
  const filter = options.filter ?? "inbox";
  const pageSize = options.pageSize ?? 20;
  /** The server's items as last answered, by id. */
  const confirmed = new Map<string, InboxItem>();
  let cursor: string | null = null;
  let hasMore = false;
  let loading = false;
  let connection: ConnectionState = "closed";
  let error: Error | null = null;
  /** The server's counts as last read. */
  let base: InboxCounts | null = null;
  /** Marks sent and not yet answered, in the order they were made. */
  const pending: Change[] = [];
  /** Count changes of marks that the latest counts read may not include. */
  let deltas: Delta[] = [];
  /** Server counts were set aside as ambiguous: a read follows once every mark is answered. */
  let stale = false;
  /** The tick from which `base` is known to hold everything: a read begun before it may be older. */
  let baseFrom = 0;
  let clock = 0;
  const listeners = new Set<(state: InboxFeedState) => void>();
  /** Per item, the latest mark sent: the next waits for it, so the server applies them in order. */
  const chains = new Map<string, Promise<void>>();
  let close: (() => void) | undefined;
  let starting: Promise<void> | undefined;
  let loadingMore: Promise<void> | undefined;
  let refreshing: Promise<void> | undefined;
  let refreshAgain = false;
  let opened = false;

  const shown = (item: InboxItem) =>
    pending.reduce((it, change) => (change.covers(it) ? applyChange(it, change.set, change.at) : it), item);
  const shownById = (id: string) => {
    const item = confirmed.get(id);
    return item === undefined ? undefined : shown(item);
  };

  const snapshot = (): InboxFeedState => {
    const items = [...confirmed.values()]
      .map(shown)
      .filter((item) => inFilter(item, filter))
      .sort((a, b) => compareIds(b.id, a.id));
    const counts = base === null ? null : deltas.reduce((sum, delta) => add(sum, delta.by), base as InboxCounts);
    return {
      items,
      counts:
        counts === null
          ? null
          : {
              unread: Math.max(0, counts.unread),
              unseen: Math.max(0, counts.unseen),
              total: Math.max(0, counts.total),
            },
      hasMore,
      loading,
      connection,
      error,
    };
  };

  let state = snapshot();
  const emit = () => {
    state = snapshot();
    for (const listener of [...listeners]) listener(state);
  };

  const failed = (cause: unknown) => {
    error = cause instanceof Error ? cause : new Error(String(cause));
  };

  /** Reads again once no mark is unanswered, if counts were set aside meanwhile. */
  const settle = () => {
    if (stale && deltas.every((delta) => delta.settled !== null)) void refreshCounts();
  };

  /**
   * Counts the server computed after tick `readFrom` (and, for a mark-all's answer, after its own
   * change), or pushed (`readFrom` null: computed at a time the feed cannot know). They replace the
   * shown counts only when they hold every outstanding mark and a read is not older than the
   * counts shown; else they are set aside for a read after the marks are answered. Applied on top
   * of a mark they already include, they would count it twice.
   */
  const receiveCounts = (counts: InboxCounts, readFrom: number | null, own?: Delta) => {
    const older = readFrom !== null && readFrom < baseFrom;
    if (older || !readCovers(deltas, readFrom ?? Number.NEGATIVE_INFINITY, own)) {
      stale = true;
      settle();
      return;
    }
    base = counts;
    baseFrom = readFrom ?? clock;
    deltas = [];
    emit();
  };

  /** Reads the counts after marks were answered; one read at a time, and one more if marks were answered meanwhile. */
  const refreshCounts = (): Promise<void> => {
    if (refreshing !== undefined) {
      refreshAgain = true;
      return refreshing;
    }
    const readFrom = ++clock;
    stale = false;
    refreshing = client
      .counts()
      .then((counts) => receiveCounts(counts, readFrom))
      .catch(() => undefined)
      .finally(() => {
        refreshing = undefined;
        if (refreshAgain) {
          refreshAgain = false;
          void refreshCounts();
        }
      });
    return refreshing;
  };

  const newestId = () => {
    let newest: string | undefined;
    for (const id of confirmed.keys()) if (newest === undefined || compareIds(id, newest) > 0) newest = id;
    return newest;
  };
  const oldestId = () => {
    let oldest: string | undefined;
    for (const id of confirmed.keys()) if (oldest === undefined || compareIds(id, oldest) < 0) oldest = id;
    return oldest;
  };

  /** Adds the items not held yet: a page, or one from the stream. */
  const merge = (items: readonly InboxItem[]) => {
    for (const item of items) if (!confirmed.has(item.id)) confirmed.set(item.id, item);
  };

  const onItem = (item: InboxItem) => {
    if (confirmed.has(item.id) || !inFilter(shown(item), filter)) return;
    // Older than the pages read so far: the next page brings it, in its place.
    const oldest = oldestId();
    if (hasMore && oldest !== undefined && compareIds(item.id, oldest) < 0) return;
    confirmed.set(item.id, item);
    emit();
  };

  const mark = (id: string, set: InboxItemChange): Promise<void> => {
    const change: Change = { covers: (item) => item.id === id, set, at: new Date().toISOString() };
    const before = countsOf(shownById(id));
    pending.push(change);
    const delta: Delta = { by: add(countsOf(shownById(id)), before, -1), settled: null };
    deltas.push(delta);
    emit();
    const previous = chains.get(id) ?? Promise.resolve();
    const sent = previous.then(async () => {
      try {
        const item = await client.update(id, set);
        pending.splice(pending.indexOf(change), 1);
        if (confirmed.has(id)) confirmed.set(id, item);
        delta.settled = ++clock;
        emit();
        void refreshCounts();
      } catch (cause) {
        pending.splice(pending.indexOf(change), 1);
        deltas = deltas.filter((d) => d !== delta);
        failed(cause);
        emit();
        settle();
      }
    });
    chains.set(id, sent);
    void sent.finally(() => {
      if (chains.get(id) === sent) chains.delete(id);
    });
    return sent;
  };

  const markAll = async (action: MarkAllAction): Promise<void> => {
    // Up to the newest item listed: one that arrives meanwhile stays as it is.
    const upTo = newestId();
    const change: Change = {
      // As the server's: the items not archived (the inbox view), up to and including `upTo`.
      covers: (item) => item.archived_at === null && (upTo === undefined || compareIds(item.id, upTo) <= 0),
      set: MARK_ALL_SETS[action],
      at: new Date().toISOString(),
    };
    const shownCounts = state.counts ?? ZERO;
    const sentAt = ++clock;
    pending.push(change);
    const delta: Delta = { by: add(afterMarkAll(shownCounts, action), shownCounts, -1), settled: null };
    deltas.push(delta);
    emit();
    try {
      const counts = await client.markAll(action, upTo === undefined ? {} : { beforeId: upTo });
      pending.splice(pending.indexOf(change), 1);
      for (const [id, item] of confirmed) {
        if (change.covers(item)) confirmed.set(id, applyChange(item, change.set, change.at));
      }
      delta.settled = ++clock;
      emit();
      // Counted after this change: it holds the marks answered before it was sent.
      receiveCounts(counts, sentAt, delta);
    } catch (cause) {
      pending.splice(pending.indexOf(change), 1);
      deltas = deltas.filter((d) => d !== delta);
      failed(cause);
      emit();
      settle();
    }
  };

  const connect = (lastEventId: string | undefined) => {
    close = client.connect(
      {
        onItem,
        // Pushed counts were computed at a time the feed cannot know: they stand only when no mark
        // is outstanding, and are read again otherwise.
        onCounts: (counts) => receiveCounts(counts, null),
        onState: (next, cause) => {
          connection = next;
          if (next === "closed" && cause !== undefined) failed(cause);
          emit();
          // Counts may have moved while the stream was away.
          if (next === "open") {
            if (opened) void refreshCounts();
            opened = true;
          }
        },
      },
      lastEventId === undefined ? {} : { lastEventId },
    );
  };

  const start = async () => {
    loading = true;
    error = null;
    emit();
    try {
      // The newest item of all, read before this filter's page: when the page is empty the stream
      // resumes after it, and an item stored between the two reads is replayed, not missed.
      const newestOfAll =
        filter === "all" ? undefined : ((await client.list({ filter: "all", limit: 1 })).items[0]?.id ?? "0");
      const [page, counts] = await Promise.all([
        client.list({ filter, limit: pageSize }),
        client.counts().catch((cause: unknown) => {
          failed(cause);
          return null;
        }),
      ]);
      merge(page.items);
      cursor = page.nextCursor;
      hasMore = page.hasMore;
      if (counts !== null) base = counts;
      // The stream resumes after the newest item the user has: nothing stored since the page
      // was read is missed. With none in this filter, after the newest of all read before it.
      const resumeAfter = newestId() ?? newestOfAll ?? "0";
      loading = false;
      emit();
      if (starting !== undefined) connect(resumeAfter);
    } catch (cause) {
      loading = false;
      starting = undefined;
      failed(cause);
      emit();
    }
  };

  return {
    get state() {
      return state;
    },
    subscribe(listener) {
      listeners.add(listener);
      listener(state);
      return () => {
        listeners.delete(listener);
      };
    },
    start() {
      starting ??= start();
      return starting;
    },
    loadMore() {
      if (!hasMore || cursor === null) return Promise.resolve();
      loadingMore ??= (async () => {
        loading = true;
        error = null;
        emit();
        try {
          const page = await client.list({ filter, limit: pageSize, cursor: cursor as string });
          merge(page.items);
          cursor = page.nextCursor;
          hasMore = page.hasMore;
        } catch (cause) {
          failed(cause);
        } finally {
          loading = false;
          loadingMore = undefined;
          emit();
        }
      })();
      return loadingMore;
    },
    markRead: (id, read = true) => mark(id, { read }),
    markSeen: (id) => mark(id, { seen: true }),
    archive: (id, archived = true) => mark(id, { archived }),
    markAllRead: () => markAll("read"),
    markAllSeen: () => markAll("seen"),
    archiveAll: () => markAll("archived"),
    stop() {
      starting = undefined;
      close?.();
      close = undefined;
      connection = "closed";
      emit();
    },
  };
}
