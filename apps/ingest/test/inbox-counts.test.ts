import { seedApiKey, storeInboxItem } from "@notify/db";
import { captureLogger, countingDatabase, eventually, freshDatabase, seedNotification } from "@notify/testing";
import fc from "fast-check";
import t from "tap";
import { createInboxHub } from "../src/inbox/hub.js";
import { ingestApp, type SseEvent, sseEvents } from "./support.js";

// The inbox's counts (total: not archived; unread and unseen of those), mark-all, and the
// stream's `counts` event: sent after `ready` and whenever the counts change, through any route
// and any instance (Postgres NOTIFY), shared by the streams of one user in a process, and never
// costing a stream whose user nothing happened to a statement.

const { url, database } = await freshDatabase(t);
const unlimited = { perSecond: 100_000, burst: 100_000 };
const settings = { tokenRate: unlimited, userRate: unlimited, pollMs: 60_000 };
const { app, bus } = await ingestApp(t, { database, inbox: settings });
const inboxKey = await seedApiKey(database, { clientId: "shop", name: "inbox", scopes: ["inbox"] });
const bankKey = await seedApiKey(database, { clientId: "bank", name: "bank inbox", scopes: ["inbox"] });

type App = Awaited<ReturnType<typeof ingestApp>>["app"];
interface Counts {
  unread: number;
  unseen: number;
  total: number;
}

async function mint(userId: string, key = inboxKey, on: App = app) {
  const res = await on.request(`/api/v1/users/${userId}/inbox-tokens`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}` },
  });
  if (res.status !== 201) throw new Error(`mint: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { token: string }).token;
}

let sent = 0;
/** A notification of `client` to the user, delivered in-app: its item id. */
async function deliver(userId: string, client = "shop") {
  const id = `n-${client}-${userId}-${sent++}`;
  await seedNotification(database, { id, clientId: client, userId });
  return storeInboxItem(database.sql, { userId, notificationId: id, category: "account", title: null, body: "b" });
}

const asUser = (token: string, path: string, init: RequestInit = {}, on: App = app) =>
  on.request(`/api/v1${path}`, {
    ...init,
    headers: { "x-inbox-token": token, ...(init.headers as Record<string, string>) },
  });
const json = (body: unknown): RequestInit => ({
  headers: { "content-type": "application/json" },
  body: JSON.stringify(body),
});
const counts = async (token: string, on: App = app) => {
  const res = await asUser(token, "/inbox/counts", {}, on);
  if (res.status !== 200) throw new Error(`counts: ${res.status} ${await res.text()}`);
  return (await res.json()) as Counts;
};
const markAll = (token: string, body: unknown, on: App = app) =>
  asUser(token, "/inbox/mark-all", { method: "POST", ...json(body) }, on);
const setState = (token: string, id: number, change: Record<string, boolean>, on: App = app) =>
  asUser(token, `/inbox/${id}`, { method: "PATCH", ...json(change) }, on);

/** Opens a stream in-process and reads it as it arrives. */
async function openStream(token: string, on: App = app) {
  const res = await on.request("/api/v1/inbox/stream", { headers: { "x-inbox-token": token } });
  if (res.status !== 200 || res.body === null) throw new Error(`stream: ${res.status}`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  void (async () => {
    for (;;) {
      const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  })();
  t.teardown(() => reader.cancel().catch(() => {}));
  const events = (): SseEvent[] => sseEvents(text);
  const countEvents = () => events().filter((e) => e.event === "counts");
  return {
    events,
    countEvents,
    /** Waits for the stream's counts event number `n` (1: the first) and answers it. */
    counts: async (n: number) =>
      JSON.parse(
        (await eventually(async () => countEvents()[n - 1], 5000, `counts event ${n}`)).data ?? "null",
      ) as Counts,
  };
}

t.test("counts: not archived, and of those unread and unseen, of this user and client only", async (t) => {
  const token = await mint("ann");
  t.same(await counts(token), { unread: 0, unseen: 0, total: 0 });
  const [a, b, c] = [await deliver("ann"), await deliver("ann"), await deliver("ann")];
  await deliver("ann", "bank");
  await deliver("ben");
  t.same(await counts(token), { unread: 3, unseen: 3, total: 3 });
  t.equal((await setState(token, a, { seen: true })).status, 200);
  t.equal((await setState(token, b, { read: true })).status, 200);
  t.equal((await setState(token, c, { archived: true })).status, 200);
  t.same(await counts(token), { unread: 1, unseen: 1, total: 2 });
  t.same(await counts(await mint("ann", bankKey)), { unread: 1, unseen: 1, total: 1 }, "the bank's own item");
});

t.test("mark-all: one call, bounded by before_id, answering the new counts", async (t) => {
  const token = await mint("cat");
  const ids = [await deliver("cat"), await deliver("cat"), await deliver("cat")];
  const bankItem = await deliver("cat", "bank");
  const seen = await markAll(token, { action: "seen", before_id: String(ids[1]) });
  t.equal(seen.status, 200);
  t.same(await seen.json(), { unread: 3, unseen: 1, total: 3 }, "up to and including before_id");
  const read = await markAll(token, { action: "read" });
  t.same(await read.json(), { unread: 0, unseen: 1, total: 3 });
  const page = (await (await asUser(token, "/inbox?filter=all")).json()) as {
    data: Array<{ id: string; seen_at: string | null; read_at: string | null }>;
  };
  t.same(
    page.data.map((i) => [Number(i.id), i.seen_at !== null, i.read_at !== null]),
    [
      [ids[2], false, true],
      [ids[1], true, true],
      [ids[0], true, true],
    ],
  );
  const archived = await markAll(token, { action: "archived" });
  t.same(await archived.json(), { unread: 0, unseen: 0, total: 0 });
  const bank = (await (await asUser(await mint("cat", bankKey), "/inbox")).json()) as {
    data: Array<{ id: string; read_at: string | null; archived_at: string | null }>;
  };
  t.match(
    bank.data,
    [{ id: String(bankItem), read_at: null, archived_at: null }],
    "another client's item is untouched",
  );

  for (const body of [{}, { action: "unread" }, { action: "read", before_id: 3 }, { action: "read", extra: 1 }, []]) {
    const refused = await markAll(token, body);
    t.equal(refused.status, 400, JSON.stringify(body));
    t.equal(refused.headers.get("content-type"), "application/problem+json");
    t.match(await refused.json(), { code: "validation_failed" });
  }
});

t.test("counts match a model of the items after any sequence of marks and mark-alls", async (t) => {
  interface State {
    seen: boolean;
    read: boolean;
    archived: boolean;
  }
  const action = fc.constantFrom("seen" as const, "read" as const, "archived" as const);
  const op = fc.oneof(
    fc.record({ kind: fc.constant("store" as const), client: fc.constantFrom("shop", "shop", "bank") }),
    fc.record({
      kind: fc.constant("set" as const),
      pick: fc.nat(),
      change: fc.record({ seen: fc.boolean(), read: fc.boolean(), archived: fc.boolean() }, { requiredKeys: [] }),
    }),
    fc.record({ kind: fc.constant("all" as const), action, bound: fc.option(fc.nat(), { nil: undefined }) }),
  );
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 20 }), async (ops) => {
      const user = `prop-${run++}`;
      const token = await mint(user);
      const model = new Map<number, State>();
      const expected = (): Counts => {
        const live = [...model.values()].filter((s) => !s.archived);
        return {
          unread: live.filter((s) => !s.read).length,
          unseen: live.filter((s) => !s.seen).length,
          total: live.length,
        };
      };
      for (const o of ops) {
        if (o.kind === "store") {
          // The bank's items are this user's too, but never in the shop's counts.
          const id = await deliver(user, o.client);
          if (o.client === "shop") model.set(id, { seen: false, read: false, archived: false });
        } else if (o.kind === "set") {
          const ids = [...model.keys()];
          if (ids.length === 0 || Object.keys(o.change).length === 0) continue;
          const id = ids[o.pick % ids.length] as number;
          const res = await setState(token, id, o.change);
          if (res.status !== 200) throw new Error(`PATCH: ${res.status}`);
          Object.assign(model.get(id) as State, o.change);
        } else {
          const ids = [...model.keys()];
          const bound = o.bound === undefined || ids.length === 0 ? null : (ids[o.bound % ids.length] as number);
          const res = await markAll(token, {
            action: o.action,
            ...(bound === null ? {} : { before_id: String(bound) }),
          });
          if (res.status !== 200) throw new Error(`mark-all: ${res.status}`);
          for (const [id, state] of model) {
            if (!state.archived && (bound === null || id <= bound)) state[o.action] = true;
          }
          const answered = (await res.json()) as Counts;
          if (JSON.stringify(answered) !== JSON.stringify(expected())) {
            throw new Error(`mark-all answered ${JSON.stringify(answered)}, the model ${JSON.stringify(expected())}`);
          }
        }
        const got = await counts(token);
        if (JSON.stringify(got) !== JSON.stringify(expected())) {
          throw new Error(
            `after ${JSON.stringify(o)}: ${JSON.stringify(got)}, the model ${JSON.stringify(expected())}`,
          );
        }
      }
      const page = (await (await asUser(token, "/inbox?filter=all&limit=100")).json()) as {
        data: Array<{ id: string; seen_at: string | null; read_at: string | null; archived_at: string | null }>;
      };
      const states = page.data
        .map((i) => [Number(i.id), i.seen_at !== null, i.read_at !== null, i.archived_at !== null])
        .sort((a, b) => Number(a[0]) - Number(b[0]));
      const modelled = [...model]
        .map(([id, s]) => [id, s.seen, s.read, s.archived])
        .sort((a, b) => Number(a[0]) - Number(b[0]));
      if (JSON.stringify(states) !== JSON.stringify(modelled)) {
        throw new Error(`items ${JSON.stringify(states)}, the model ${JSON.stringify(modelled)}`);
      }
    }),
    { numRuns: 40 },
  );
  t.pass("40 random sequences, counts and items as modelled after every step");
});

t.test("the stream sends counts after ready, when an item arrives, and after a mark or a mark-all", async (t) => {
  const token = await mint("dan");
  const first = await deliver("dan");
  const stream = await openStream(token);
  t.same(await stream.counts(1), { unread: 1, unseen: 1, total: 1 });
  const readyAt = stream.events().findIndex((e) => e.event === "ready");
  t.ok(readyAt >= 0 && readyAt < stream.events().findIndex((e) => e.event === "counts"), "after ready");

  const second = await deliver("dan");
  t.same(await stream.counts(2), { unread: 2, unseen: 2, total: 2 }, "a new item");
  const events = stream.events();
  t.ok(
    events.findIndex((e) => e.event === "notification" && e.id === String(second)) <
      events.findLastIndex((e) => e.event === "counts"),
    "after the item itself",
  );

  t.equal((await setState(token, first, { read: true })).status, 200);
  t.same(await stream.counts(3), { unread: 1, unseen: 2, total: 2 }, "an item read");
  t.equal((await markAll(token, { action: "seen" })).status, 200);
  t.same(await stream.counts(4), { unread: 1, unseen: 0, total: 2 }, "mark-all");
  t.equal((await setState(token, second, { archived: true })).status, 200);
  t.same(await stream.counts(5), { unread: 0, unseen: 0, total: 1 }, "an item archived");
  t.ok(
    stream.countEvents().every((e) => e.id === undefined),
    "a counts event has no id: Last-Event-ID resumes after item ids",
  );
  t.same(
    stream
      .events()
      .filter((e) => e.id !== undefined)
      .map((e) => e.event),
    ["notification"],
    "only item events carry an id",
  );
});

t.test("when the LISTEN connection is back after a loss, every stream counts again", async (t) => {
  const token = await mint("ida");
  const item = await deliver("ida");
  const stream = await openStream(token);
  t.same(await stream.counts(1), { unread: 1, unseen: 1, total: 1 });
  // A change whose notification is lost: made without one, as while the connection was gone.
  await database.sql`update inbox_items set read_at = now() where id = ${item}`;
  await database.sql`
    select pg_terminate_backend(pid) from pg_stat_activity
    where datname = current_database() and query ilike 'listen %'`;
  t.same(await stream.counts(2), { unread: 0, unseen: 1, total: 1 });
});

t.test("a change made through another instance reaches this instance's streams", async (t) => {
  const other = await ingestApp(t, { database, bus, inbox: settings });
  const token = await mint("eli");
  const item = await deliver("eli");
  const stream = await openStream(token);
  t.same(await stream.counts(1), { unread: 1, unseen: 1, total: 1 });
  t.equal((await setState(token, item, { read: true }, other.app)).status, 200);
  t.same(await stream.counts(2), { unread: 0, unseen: 1, total: 1 }, "a mark on the other instance");
  t.equal((await markAll(token, { action: "archived" }, other.app)).status, 200);
  t.same(await stream.counts(3), { unread: 0, unseen: 0, total: 0 }, "a mark-all on the other instance");
});

t.test("one count serves all of a user's streams, and other users' streams pay nothing", async (t) => {
  const statements: string[] = [];
  const inboxDatabase = await countingDatabase(t, url, (query) => statements.push(query));
  const counted = await ingestApp(t, { database, bus, inboxDatabase, inbox: settings });
  const token = await mint("fin", inboxKey, counted.app);
  const item = await deliver("fin");
  const streams = await Promise.all([1, 2, 3].map(() => openStream(token, counted.app)));
  const bystanders = await Promise.all(
    ["gil", "hal"].map(async (user) => openStream(await mint(user, inboxKey, counted.app), counted.app)),
  );
  for (const s of [...streams, ...bystanders]) await s.counts(1);

  statements.length = 0;
  t.equal((await setState(token, item, { read: true }, counted.app)).status, 200);
  for (const s of streams) t.same(await s.counts(2), { unread: 0, unseen: 1, total: 1 });
  const countsRead = statements.filter((q) => q.includes("count(*)"));
  t.equal(countsRead.length, 1, "the three streams of the user shared one count");
  t.notOk(
    statements.some((q) => q.includes("id >")),
    "a change of state reads no item",
  );
  t.same(
    bystanders.map((s) => s.countEvents().length),
    [1, 1],
    "the other users' streams were not woken",
  );

  statements.length = 0;
  t.equal((await setState(token, item, { read: true }, counted.app)).status, 200, "marked read again");
  await deliver("fin", "bank");
  // The user's streams look for the item (it is another client's, so they find none).
  await eventually(
    async () => (statements.filter((q) => q.includes("id >")).length === 3 ? true : undefined),
    5000,
    "the streams to look for the bank's item",
  );
  t.equal((await setState(token, item, { seen: true }, counted.app)).status, 200);
  for (const s of streams) t.same(await s.counts(3), { unread: 0, unseen: 0, total: 1 });
  t.equal(
    statements.filter((q) => q.includes("count(*)")).length,
    1,
    "neither a repeat nor another client's item cost a count",
  );
});

t.test("a stream that asks after the others' count is done takes it, while nothing changed since", async (t) => {
  // One of a user's streams may still be reading items when the others count a change: it asks
  // for the count after theirs is done, and takes it.
  const statements: string[] = [];
  const hub = createInboxHub(
    await countingDatabase(t, url, (query) => statements.push(query)),
    captureLogger("ingest").log,
    { pollMs: 60_000 },
  );
  const owner = { clientId: "shop", userId: "ivy" };
  const unsubscribe = hub.subscribe(owner.userId, () => {});
  t.teardown(unsubscribe);
  await deliver("ivy");
  const since = hub.sequence();
  const first = await hub.counts(owner, since);
  t.same(await hub.counts(owner, since), first, "the same count");
  t.equal(statements.filter((q) => q.includes("count(*)")).length, 1, "counted once");
  t.same(
    await hub.counts({ ...owner, clientId: "bank" }, since),
    { unread: 0, unseen: 0, total: 0 },
    "another client's own",
  );
  t.equal(statements.filter((q) => q.includes("count(*)")).length, 2, "counted apart");
});
