import fc from "fast-check";
import t from "tap";
import type { InboxClient } from "../src/client.js";
import type { ConnectionHandlers } from "../src/connection.js";
import { InboxApiError } from "../src/errors.js";
import { applyChange, countsOf, createInboxFeed, inFilter } from "../src/feed.js";
import { compareIds } from "../src/ids.js";
import type { InboxCounts, InboxFilter, InboxItem, InboxItemChange } from "../src/types.js";

// The feed's merging and marks, against an in-memory inbox that answers as the server does
// (newest first, cursor pages, per-item states, counts of the not archived): whatever order pages,
// stream items (new, replayed, duplicated) and marks' answers come in, the feed holds each item
// once, newest first, and ends as the server is.

const AT = "2026-01-01T00:00:00.000Z";
const item = (id: number, state: { seen?: boolean; read?: boolean; archived?: boolean } = {}): InboxItem => ({
  id: String(id),
  notification_id: `n-${id}`,
  category: "account",
  title: null,
  body: `item ${id}`,
  created_at: AT,
  seen_at: state.seen ? AT : null,
  read_at: state.read ? AT : null,
  archived_at: state.archived ? AT : null,
});

/** The server's inbox, in memory: what the list, a change and the counts answer. */
class Inbox {
  items = new Map<string, InboxItem>();
  next = 1;
  add(state?: { seen?: boolean; read?: boolean; archived?: boolean }): InboxItem {
    const created = item(this.next++, state);
    this.items.set(created.id, created);
    return created;
  }
  list(filter: InboxFilter, limit: number, cursor?: string) {
    const all = [...this.items.values()]
      .filter((i) => inFilter(i, filter))
      .filter((i) => cursor === undefined || compareIds(i.id, cursor) < 0)
      .sort((a, b) => compareIds(b.id, a.id));
    const items = all.slice(0, limit);
    const hasMore = all.length > limit;
    return { items, hasMore, nextCursor: hasMore ? (items.at(-1)?.id ?? null) : null };
  }
  update(id: string, change: InboxItemChange): InboxItem {
    const current = this.items.get(id);
    if (current === undefined) throw new InboxApiError(404, { code: "not_found" });
    const stamp = (on: boolean | undefined, was: string | null) => (on === undefined ? was : on ? (was ?? AT) : null);
    const updated = {
      ...current,
      seen_at: stamp(change.seen, current.seen_at),
      read_at: stamp(change.read, current.read_at),
      archived_at: stamp(change.archived, current.archived_at),
    };
    this.items.set(id, updated);
    return updated;
  }
  counts(): InboxCounts {
    const sum = { unread: 0, unseen: 0, total: 0 };
    for (const i of this.items.values()) {
      const c = countsOf(i);
      sum.unread += c.unread;
      sum.unseen += c.unseen;
      sum.total += c.total;
    }
    return sum;
  }
}

/** An InboxClient over `inbox`; `delay` decides when each answer comes. */
function fakeClient(inbox: Inbox, delay: <T>(answer: () => T) => Promise<T> = async (answer) => answer()) {
  const live: { handlers?: ConnectionHandlers } = {};
  const client: InboxClient = {
    list: (query = {}) => delay(() => inbox.list(query.filter ?? "inbox", query.limit ?? 20, query.cursor)),
    counts: () => delay(() => inbox.counts()),
    update: (id, change) => delay(() => inbox.update(id, change)),
    markAll: () => Promise.reject(new Error("not in this test")),
    preferences: () => Promise.reject(new Error("not in this test")),
    updatePreferences: () => Promise.reject(new Error("not in this test")),
    connect(handlers) {
      live.handlers = handlers;
      handlers.onState?.("open");
      return () => {
        live.handlers = undefined;
      };
    },
  };
  return { client, live };
}

const MARK_ALL: Record<"read" | "seen" | "archived", InboxItemChange> = {
  read: { read: true },
  seen: { seen: true },
  archived: { archived: true },
};

const filters = fc.constantFrom<InboxFilter>("inbox", "unread", "archived", "all");
const states = fc.record({ seen: fc.boolean(), read: fc.boolean(), archived: fc.boolean() });

type Step = { kind: "new" } | { kind: "replay"; pick: number } | { kind: "more" };
const steps = fc.array(
  fc.oneof(
    fc.constant<Step>({ kind: "new" }),
    fc.nat().map<Step>((pick) => ({ kind: "replay", pick })),
    fc.constant<Step>({ kind: "more" }),
  ),
  { maxLength: 30 },
);

const ids = (items: InboxItem[]) => items.map((i) => i.id);
const newestFirst = (items: InboxItem[]) => [...items].sort((a, b) => compareIds(b.id, a.id));

t.test("pages and stream items, replayed and doubled, merge to each item once, newest first", async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(states, { maxLength: 30 }),
      fc.integer({ min: 1, max: 7 }),
      filters,
      steps,
      async (initial, pageSize, filter, plan) => {
        const inbox = new Inbox();
        for (const s of initial) inbox.add(s);
        const { client, live } = fakeClient(inbox);
        const feed = createInboxFeed(client, { filter, pageSize });
        await feed.start();
        const check = () => {
          const shown = ids(feed.state.items);
          if (new Set(shown).size !== shown.length) throw new Error(`an item twice: ${shown}`);
          if (shown.join() !== ids(newestFirst(feed.state.items)).join()) throw new Error(`not newest first: ${shown}`);
        };
        for (const step of plan) {
          if (step.kind === "new") live.handlers?.onItem?.(inbox.add());
          else if (step.kind === "replay") {
            const all = [...inbox.items.values()];
            const again = all[step.pick % Math.max(1, all.length)];
            if (again) live.handlers?.onItem?.(again);
          } else await feed.loadMore();
          check();
        }
        while (feed.state.hasMore) await feed.loadMore();
        check();
        const expected = newestFirst([...inbox.items.values()].filter((i) => inFilter(i, filter)));
        return ids(feed.state.items).join() === ids(expected).join();
      },
    ),
    { numRuns: 300 },
  );
  t.pass("every run held each item once, newest first, and ended with the server's list");
});

const marks = fc.array(
  fc.record<{ pick: number; change: InboxItemChange; fails: boolean }>({
    pick: fc.nat(),
    change: fc.oneof(
      fc.boolean().map((read) => ({ read })),
      fc.constant({ seen: true }),
      fc.boolean().map((archived) => ({ archived })),
    ),
    fails: fc.boolean(),
  }),
  { minLength: 1, maxLength: 12 },
);

t.test("racing marks, answered in any order, some failing, end as the server is", async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.scheduler(),
      fc.array(states, { minLength: 1, maxLength: 4 }),
      marks,
      async (s, initial, plan) => {
        const inbox = new Inbox();
        for (const state of initial) inbox.add(state);
        const { client, live } = fakeClient(inbox, (answer) => s.schedule(Promise.resolve()).then(answer));
        // Whether each item's marks fail, in the order they are made: the order the feed sends them in.
        const failing = new Map<string, boolean[]>();
        const update = client.update;
        // Each change the server applies is pushed as counts on the stream, in order, at a time the
        // scheduler picks: before or after the change's answer.
        let pushes = Promise.resolve();
        client.update = (id, change) => {
          if (failing.get(id)?.shift()) return s.schedule(Promise.reject(new InboxApiError(503, {})));
          return update(id, change).then((answer) => {
            const counts = inbox.counts();
            pushes = pushes.then(() => s.schedule(Promise.resolve())).then(() => live.handlers?.onCounts?.(counts));
            return answer;
          });
        };
        const feed = createInboxFeed(client, { filter: "all", pageSize: 10 });
        const started = feed.start();
        await s.waitFor(started);
        const optimistic: Promise<void>[] = [];
        // The user's intent: the marks that do not fail, applied in the order they were made.
        const intended = new Map([...inbox.items].map(([id, i]) => [id, i]));
        for (const m of plan) {
          const target = [...inbox.items.keys()][m.pick % inbox.items.size] as string;
          if (!m.fails) intended.set(target, applyChange(intended.get(target) as InboxItem, m.change, AT));
          failing.set(target, [...(failing.get(target) ?? []), m.fails]);
          const before = feed.state.items.find((i) => i.id === target);
          const done =
            m.change.read !== undefined
              ? feed.markRead(target, m.change.read)
              : m.change.seen !== undefined
                ? feed.markSeen(target)
                : feed.archive(target, m.change.archived);
          optimistic.push(done);
          // Applied at once, before any answer.
          const shown = feed.state.items.find((i) => i.id === target);
          if (m.change.read !== undefined && (shown?.read_at !== null) !== m.change.read) return false;
          if (m.change.archived !== undefined && (shown?.archived_at !== null) !== m.change.archived) return false;
          if (m.change.seen && shown?.seen_at === null) return false;
          if (before === undefined) return false;
        }
        await s.waitFor(Promise.all(optimistic));
        // Until nothing is left to answer: a counts read may ask for one more after it.
        do {
          await s.waitAll();
          await new Promise((resolve) => setTimeout(resolve, 0));
        } while (s.count() > 0);
        const expected = newestFirst([...inbox.items.values()]);
        const sameItems = JSON.stringify(feed.state.items) === JSON.stringify(expected);
        const sameCounts = JSON.stringify(feed.state.counts) === JSON.stringify(inbox.counts());
        const failed = plan.some((m) => m.fails);
        if (JSON.stringify(newestFirst([...intended.values()])) !== JSON.stringify(expected)) return false;
        return sameItems && sameCounts && (feed.state.error !== null) === failed;
      },
    ),
    { numRuns: 300 },
  );
  t.pass("every run showed each mark at once and ended with the server's items and counts");
});

t.test("a mark that fails is rolled back, with the error in the state", async (t) => {
  const inbox = new Inbox();
  const unread = inbox.add();
  const { client } = fakeClient(inbox);
  client.update = async () => {
    throw new InboxApiError(503, { code: "dependency_unavailable", detail: "down" }, 2);
  };
  const feed = createInboxFeed(client, { filter: "inbox" });
  await feed.start();
  t.same(feed.state.counts, { unread: 1, unseen: 1, total: 1 });
  const seen: Array<{ read: boolean; unread: number | undefined }> = [];
  feed.subscribe((state) => seen.push({ read: state.items[0]?.read_at != null, unread: state.counts?.unread }));
  await feed.markRead(unread.id);
  t.same(seen, [
    { read: false, unread: 1 },
    { read: true, unread: 0 },
    { read: false, unread: 1 },
  ]);
  t.match(feed.state.error, { name: "InboxApiError", status: 503, retryAfterSeconds: 2 });
});

t.test("an item stored right after an empty page is replayed by the stream, not skipped", async (t) => {
  const inbox = new Inbox();
  inbox.add({ read: true });
  inbox.add({ read: true });
  let stored: InboxItem | undefined;
  let resumedAfter: string | undefined;
  const { client } = fakeClient(inbox);
  const list = client.list;
  client.list = async (query = {}) => {
    const page = await list(query);
    // The page of unread items is empty; a new one is stored as it is answered.
    if (query.filter === "unread" && stored === undefined) stored = inbox.add();
    return page;
  };
  const connect = client.connect;
  client.connect = (handlers, options) => {
    resumedAfter = options?.lastEventId;
    return connect(handlers, options);
  };
  const feed = createInboxFeed(client, { filter: "unread" });
  await feed.start();
  t.ok(stored !== undefined && resumedAfter !== undefined);
  t.ok(
    compareIds(resumedAfter as string, (stored as InboxItem).id) < 0,
    `the stream resumes after ${resumedAfter}, before the item stored meanwhile (${stored?.id})`,
  );
  feed.stop();
});

/** A promise with its resolution in hand: the answer the test lets through when it chooses. */
function held<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

t.test("counts pushed after the server applied a mark, before its answer, do not count it twice", async (t) => {
  const inbox = new Inbox();
  const first = inbox.add();
  inbox.add();
  const { client, live } = fakeClient(inbox);
  const answer = held<void>();
  client.update = async (id, change) => {
    const updated = inbox.update(id, change);
    // The server's stream tells every open stream of the change before the HTTP answer arrives.
    live.handlers?.onCounts?.(inbox.counts());
    await answer.promise;
    return updated;
  };
  const feed = createInboxFeed(client, { filter: "inbox" });
  await feed.start();
  const shown: Array<number | undefined> = [];
  feed.subscribe((state) => shown.push(state.counts?.unread));
  const read = feed.markRead(first.id);
  t.equal(feed.state.counts?.unread, 1, "the pushed count holds the mark; the mark is not applied on top");
  answer.resolve();
  await read;
  t.same(feed.state.counts, inbox.counts(), "right after the answer, as the server counts");
  await new Promise((resolve) => setTimeout(resolve, 0));
  t.same(feed.state.counts, inbox.counts());
  t.ok(
    shown.every((unread) => unread === 2 || unread === 1),
    `never below the server's: ${shown.join(",")}`,
  );
  feed.stop();
});

t.test("a mark-all's answer that may hold a mark still unanswered is read again after it", async (t) => {
  const inbox = new Inbox();
  const first = inbox.add();
  inbox.add();
  inbox.add();
  const { client } = fakeClient(inbox);
  const answer = held<void>();
  client.update = async (id, change) => {
    const updated = inbox.update(id, change);
    await answer.promise;
    return updated;
  };
  client.markAll = async (action) => {
    for (const i of inbox.items.values()) if (i.archived_at === null) inbox.update(i.id, MARK_ALL[action]);
    return inbox.counts();
  };
  const feed = createInboxFeed(client, { filter: "inbox" });
  await feed.start();
  // The read is applied on the server and its answer held; mark-all-seen is answered first, with
  // counts that already hold the read.
  const read = feed.markRead(first.id);
  t.equal(feed.state.counts?.unread, 2);
  await new Promise((resolve) => setTimeout(resolve, 0));
  t.not(inbox.items.get(first.id)?.read_at, null, "the server applied the read");
  await feed.markAllSeen();
  t.same(feed.state.counts, { unread: 2, unseen: 0, total: 3 }, "the read is counted once");
  answer.resolve();
  await read;
  t.same(feed.state.counts, inbox.counts());
  await new Promise((resolve) => setTimeout(resolve, 0));
  t.same(feed.state.counts, inbox.counts(), "and the read after the answers agrees");
  feed.stop();
});

t.test("counts read before a mark-all, answered after it, do not undo it", async (t) => {
  const inbox = new Inbox();
  const first = inbox.add();
  inbox.add();
  const { client } = fakeClient(inbox);
  const reads: Array<ReturnType<typeof held<void>>> = [];
  client.counts = async () => {
    // Counted now, answered when the test lets it.
    const counts = inbox.counts();
    if (reads.length > 0 || feedStarted) {
      const answer = held<void>();
      reads.push(answer);
      await answer.promise;
    }
    return counts;
  };
  client.markAll = async (action) => {
    for (const i of inbox.items.values()) if (i.archived_at === null) inbox.update(i.id, MARK_ALL[action]);
    return inbox.counts();
  };
  let feedStarted = false;
  const feed = createInboxFeed(client, { filter: "inbox" });
  await feed.start();
  feedStarted = true;
  // A read: its answer is followed by a counts read, held with the counts of before the mark-all.
  await feed.markRead(first.id);
  t.equal(reads.length, 1, "the read after the mark's answer is in flight");
  await feed.markAllSeen();
  t.same(feed.state.counts, inbox.counts(), "the mark-all's answer is shown");
  reads[0]?.resolve();
  await new Promise((resolve) => setTimeout(resolve, 0));
  for (const read of reads.slice(1)) read.resolve();
  await new Promise((resolve) => setTimeout(resolve, 0));
  t.same(feed.state.counts, inbox.counts(), "the older read does not take it back");
  feed.stop();
});
