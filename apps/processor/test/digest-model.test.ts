import assert from "node:assert/strict";
import type { LaneMessage, WorkItem } from "@notify/core";
import { cancelDigestItem, createDb, type DigestItemCancel, seedTemplate, sendDueDigests } from "@notify/db";
import fc from "fast-check";
import t from "tap";
import { laneDeps } from "../src/consumers.js";
import { sendDigests } from "../src/digests/send.js";
import type { RouteDeps } from "../src/routing/plan.js";
import { routeNotification } from "../src/routing/route.js";
import { processorFixture, seedUser, storeNotifications, workItems } from "./helpers.js";
import { dyingDatabase, outcomes, streamTail } from "./model-helpers.js";

// Model-based property test of digests against the real Postgres and NATS: random interleavings
// of accepts, redeliveries, one message routed by two processors at once, two processors
// sending, processors killed inside their transaction (join or send), a send whose publishes
// are lost, cancels and the clock moving, each compared after every step with a small model of
// what must be sent. Each run has users of its own and a clock days after the last run's.
// Commands that run concurrently are checked against every serialization they may have.

const WINDOW_MS = 30 * 60_000;
const MAX_ITEMS = 3;
const USERS = 2;
const KEYS = 2;
const RUNS = Number(process.env.MODEL_RUNS ?? 25);

const { url, database, bus, clock, deps } = await processorFixture(t);
await seedTemplate(database, {
  id: "comments",
  params: ["who"],
  variants: [
    {
      channel: "email",
      locale: "en",
      subject: "<%= it.count %> new comments",
      body: "<% for (const c of it.items) { %><p><%= c.who %></p><% } %>",
    },
  ],
});
// Two processors with pools of their own, and one whose connection dies in its transaction.
const second = createDb({ url, max: 4 });
const doomed = createDb({ url, max: 2 });
t.teardown(() => Promise.all([second.close(), doomed.close()]));
const processors: RouteDeps[] = [
  await laneDeps(deps, "transactional"),
  await laneDeps({ ...deps, databases: { transactional: second, promotional: second } }, "transactional"),
];
const [first, other] = processors as [RouteDeps, RouteDeps];
const crashing = (killAt: number): RouteDeps => ({ ...first, database: dyingDatabase(doomed, killAt) });
const lanes = await streamTail<LaneMessage>(bus, bus.streams.lane("transactional"));
const works = await streamTail<WorkItem>(bus, bus.streams.work);

// --- The model -------------------------------------------------------------------------------

interface Item {
  id: string;
  user: number;
  key: number;
  /** Index of the digest it joined, or null while its lane message has not been routed. */
  digest: number | null;
  canceled: boolean;
  /** Its lane message was routed to the end (a crashed routing leaves it to be redelivered). */
  acked: boolean;
}

interface Digest {
  user: number;
  key: number;
  /** Items (their accept index), in join order. */
  items: number[];
  /** Items not canceled. */
  live: number;
  openedAt: number;
  closesAt: number;
  status: "open" | "closed" | "sent";
  sentAt: number | null;
}

interface Model {
  items: Item[];
  digests: Digest[];
}

interface Real {
  users: string[];
  messages: LaneMessage[];
  seqOf: Map<string, number>;
  /** Digest notifications stored, their publish lost: the reconciler's to route. */
  lost: LaneMessage[];
}

/** An item's lane message routed: it joins the open digest of its key, one opened when none is. */
function join(m: Model, seq: number, now: number): "routed" | "duplicate" {
  const item = m.items[seq] as Item;
  if (item.digest !== null) return "duplicate";
  let index = m.digests.findIndex((d) => d.user === item.user && d.key === item.key && d.status === "open");
  if (index < 0) {
    m.digests.push({
      user: item.user,
      key: item.key,
      items: [],
      live: 0,
      openedAt: now,
      closesAt: now + WINDOW_MS,
      status: "open",
      sentAt: null,
    });
    index = m.digests.length - 1;
  }
  const digest = m.digests[index] as Digest;
  digest.items.push(seq);
  digest.live++;
  if (digest.live >= MAX_ITEMS) {
    digest.status = "closed";
    digest.closesAt = Math.min(digest.closesAt, now);
  }
  item.digest = index;
  return "routed";
}

/** Every digest due (window ended, or full) is sent, except one a concurrent transaction holds. */
function send(m: Model, now: number, skip: number | null = null): number {
  let notifications = 0;
  m.digests.forEach((d, i) => {
    if (d.status === "sent" || d.closesAt > now || i === skip) return;
    d.status = "sent";
    d.sentAt = now;
    if (d.live > 0) notifications++;
  });
  return notifications;
}

function cancel(m: Model, seq: number): DigestItemCancel | null {
  const item = m.items[seq] as Item;
  if (item.digest === null) return null;
  if (item.canceled) return "already_canceled";
  const digest = m.digests[item.digest] as Digest;
  if (digest.status === "sent") return "too_late";
  item.canceled = true;
  digest.live--;
  return "canceled";
}

// --- What Postgres holds, and the invariants -------------------------------------------------

interface Row {
  id: string;
  user_id: string;
  key: string;
  template_id: string;
  status: string;
  item_count: number;
  max_items: number;
  opened_at: Date;
  closes_at: Date;
  sent_at: Date | null;
  notification_id: string | null;
  items: Array<{ id: string; user: string; key: string; template: string; canceled: boolean; data: unknown }>;
  notifications: Array<{ id: string; data: unknown }>;
}

const observe = (r: Real) =>
  database.sql<Row[]>`
    select d.id, d.user_id, d.key, d.template_id, d.status, d.item_count, d.max_items, d.opened_at, d.closes_at,
           d.sent_at, d.notification_id,
           coalesce((select json_agg(json_build_object('id', n.id, 'user', n.user_id, 'key', n.digest->>'key',
                                                       'template', n.template_id, 'canceled', i.canceled_at is not null,
                                                       'data', n.data) order by n.id)
                     from digest_items i join notifications n on n.id = i.notification_id
                     where i.digest_id = d.id), '[]'::json) as items,
           coalesce((select json_agg(json_build_object('id', s.id, 'data', s.data))
                     from notifications s where s.digest_of = d.id), '[]'::json) as notifications
    from digests d where d.user_id = any(${r.users}) order by d.user_id, d.key, d.id`;

/** The invariants, read from Postgres alone. */
function invariants(rows: readonly Row[]): void {
  const open = new Map<string, number>();
  const seen = new Set<string>();
  for (const row of rows) {
    const where = `digest ${row.id} (${row.user_id}/${row.key})`;
    if (row.status === "open") open.set(`${row.user_id}/${row.key}`, (open.get(`${row.user_id}/${row.key}`) ?? 0) + 1);
    const live = row.items.filter((i) => !i.canceled);
    assert.ok(row.item_count <= row.max_items, `${where} holds ${row.item_count} items, over max_items`);
    assert.equal(row.item_count, live.length, `${where}: item_count is its items not canceled`);
    for (const item of row.items) {
      assert.ok(!seen.has(item.id), `item ${item.id} is in two digests`);
      seen.add(item.id);
      assert.deepEqual(
        [item.user, item.key, item.template],
        [row.user_id, row.key, row.template_id],
        `${where} holds item ${item.id} of another user, key or template`,
      );
    }
    const window = row.opened_at.getTime() + WINDOW_MS;
    const closes = row.closes_at.getTime();
    assert.ok(
      closes === window || (closes < window && row.items.length >= row.max_items),
      `${where} closes before its window ends without having filled up`,
    );
    if (row.status === "closed") assert.ok(row.items.length >= row.max_items, `${where} closed before it filled up`);
    if (row.status !== "sent") {
      assert.equal(row.notifications.length, 0, `${where} is not sent but has a notification`);
      continue;
    }
    assert.ok(row.sent_at && row.sent_at.getTime() >= closes, `${where} sent before it closes`);
    assert.equal(row.notifications.length, live.length > 0 ? 1 : 0, `${where}: one notification if any item is left`);
    const [sent] = row.notifications;
    if (!sent) continue;
    assert.equal(row.notification_id, sent.id, `${where} names its notification`);
    assert.deepEqual(
      sent.data,
      { items: live.map((i) => i.data), count: live.length, omitted: 0 },
      `${where}: its notification's data is its items', in accept order`,
    );
  }
  for (const [key, n] of open) assert.ok(n <= 1, `${n} open digests for ${key}`);
}

interface View {
  user: number;
  key: number;
  status: string;
  count: number;
  items: string[];
  opened: string;
  closes: string;
  sent: string | null;
}

const iso = (ms: number) => new Date(ms).toISOString();
const order = (a: View, b: View) => a.user - b.user || a.key - b.key;

function modelView(m: Model): View[] {
  return m.digests
    .map((d) => ({
      user: d.user,
      key: d.key,
      status: d.status,
      count: d.live,
      items: [...d.items].sort((a, b) => a - b).map((s) => `${s}${(m.items[s] as Item).canceled ? " canceled" : ""}`),
      opened: iso(d.openedAt),
      closes: iso(d.closesAt),
      sent: d.sentAt === null ? null : iso(d.sentAt),
    }))
    .sort(order);
}

function realView(rows: readonly Row[], r: Real): View[] {
  return rows
    .map((row) => ({
      user: r.users.indexOf(row.user_id),
      key: Number(row.key.slice(1)),
      status: row.status,
      count: row.item_count,
      items: row.items.map((i) => `${r.seqOf.get(i.id) ?? `foreign ${i.id}`}${i.canceled ? " canceled" : ""}`),
      opened: row.opened_at.toISOString(),
      closes: row.closes_at.toISOString(),
      sent: row.sent_at?.toISOString() ?? null,
    }))
    .sort(order);
}

/** After a step: the invariants hold and Postgres holds what the model says. */
async function verify(m: Model, r: Real): Promise<void> {
  const rows = await observe(r);
  invariants(rows);
  assert.deepEqual(realView(rows, r), modelView(m), "the digests are as the model has them");
}

/** Serializations of concurrent steps: each step's result lands at its own index. */
function serial(m: Model, steps: ReadonlyArray<readonly [number, (c: Model) => unknown]>) {
  const model = structuredClone(m);
  const results: unknown[] = [];
  for (const [i, step] of steps) results[i] = step(model);
  return { model, results };
}

/** After concurrent steps: some serialization explains both what they answered and what Postgres holds. */
async function settle(
  m: Model,
  r: Real,
  got: readonly unknown[],
  candidates: ReadonlyArray<{ model: Model; results: unknown[] }>,
): Promise<void> {
  const rows = await observe(r);
  invariants(rows);
  const seen = realView(rows, r);
  const fits = candidates.find((c) => {
    try {
      assert.deepEqual(got, c.results);
      assert.deepEqual(seen, modelView(c.model));
      return true;
    } catch {
      return false;
    }
  });
  assert.ok(
    fits,
    `no serialization explains the answers ${JSON.stringify(got)} and the digests ${JSON.stringify(seen)}; ` +
      `candidates: ${JSON.stringify(candidates.map((c) => ({ answers: c.results, digests: modelView(c.model) })))}`,
  );
  Object.assign(m, structuredClone(fits.model));
}

// --- Commands --------------------------------------------------------------------------------

type Cmd = fc.AsyncCommand<Model, Real>;
const now = () => clock.now.getTime();
const pick = (m: Readonly<Model>, n: number) => n % m.items.length;
const hasItems = (m: Readonly<Model>) => m.items.length > 0;
const route = (p: RouteDeps, r: Real, seq: number) => routeNotification(p, r.messages[seq] as LaneMessage);
const answer = (o: { ok: unknown } | { failed: unknown }) => ("ok" in o ? o.ok : `failed: ${o.failed}`);

function command(name: string, check: (m: Readonly<Model>) => boolean, run: (m: Model, r: Real) => Promise<void>): Cmd {
  return { check, run, toString: () => name };
}

const accept = fc
  .record({ user: fc.nat(USERS - 1), key: fc.nat(KEYS - 1), on: fc.constantFrom(0, 1, null) })
  .map(({ user, key, on }) =>
    command(
      `accept(u${user}, k${key}, ${on === null ? "in flight" : `routed on ${on}`})`,
      () => true,
      async (m, r) => {
        const seq = m.items.length;
        const [message] = await storeNotifications(database, bus, [
          {
            user_id: r.users[user] as string,
            template_id: "comments",
            priority: "transactional",
            data: { who: `item ${seq}`, seq },
            digest: { key: `k${key}`, window: "30m", max_items: MAX_ITEMS },
          },
        ]);
        if (!message) throw new Error("not stored");
        r.messages.push(message);
        r.seqOf.set(message.notification_id, seq);
        m.items.push({ id: message.notification_id, user, key, digest: null, canceled: false, acked: false });
        if (on !== null) {
          assert.equal(await route(processors[on] as RouteDeps, r, seq), join(m, seq, now()));
          (m.items[seq] as Item).acked = true;
        }
        await verify(m, r);
      },
    ),
  );

const redeliver = fc.record({ n: fc.nat(), on: fc.constantFrom(0, 1) }).map(({ n, on }) =>
  command(`redeliver(#${n}, on ${on})`, hasItems, async (m, r) => {
    const seq = pick(m, n);
    assert.equal(await route(processors[on] as RouteDeps, r, seq), join(m, seq, now()));
    (m.items[seq] as Item).acked = true;
    await verify(m, r);
  }),
);

const routeTwice = fc.nat().map((n) =>
  command(`routeOnBoth(#${n})`, hasItems, async (m, r) => {
    const seq = pick(m, n);
    const got = await Promise.all([route(first, r, seq), route(other, r, seq)]);
    (m.items[seq] as Item).acked = true;
    await settle(m, r, got, [
      serial(m, [
        [0, (c) => join(c, seq, now())],
        [1, (c) => join(c, seq, now())],
      ]),
      serial(m, [
        [1, (c) => join(c, seq, now())],
        [0, (c) => join(c, seq, now())],
      ]),
    ]);
  }),
);

const routePair = fc.record({ a: fc.nat(), b: fc.nat() }).map(({ a, b }) =>
  command(
    `routeTwoAtOnce(#${a}, #${b})`,
    (m) => m.items.length >= 2,
    async (m, r) => {
      const x = pick(m, a);
      const y = (x + 1 + (b % (m.items.length - 1))) % m.items.length;
      const got = await Promise.all([route(first, r, x), route(other, r, y)]);
      (m.items[x] as Item).acked = true;
      (m.items[y] as Item).acked = true;
      await settle(m, r, got, [
        serial(m, [
          [0, (c) => join(c, x, now())],
          [1, (c) => join(c, y, now())],
        ]),
        serial(m, [
          [1, (c) => join(c, y, now())],
          [0, (c) => join(c, x, now())],
        ]),
      ]);
    },
  ),
);

const advance = fc.record({ minutes: fc.nat(40), seconds: fc.nat(59) }).map(({ minutes, seconds }) =>
  command(
    `advance(${minutes}m${seconds}s)`,
    () => true,
    async (m, r) => {
      clock.now = new Date(now() + minutes * 60_000 + seconds * 1000);
      await verify(m, r);
    },
  ),
);

const sendDue = fc.boolean().map((both) =>
  command(`sendDigests(${both ? "on both at once" : "on 0"})`, hasItems, async (m, r) => {
    const sent = both ? await Promise.all([sendDigests(first), sendDigests(other)]) : [await sendDigests(first)];
    assert.equal(
      sent.reduce((a, b) => a + b, 0),
      send(m, now()),
      "digests sent",
    );
    await verify(m, r);
  }),
);

const sendWhileRouting = fc.nat().map((n) =>
  command(`sendDigests(on 0) while routing #${n} on 1`, hasItems, async (m, r) => {
    const seq = pick(m, n);
    const fresh = (m.items[seq] as Item).digest === null;
    const got = await Promise.all([sendDigests(first), route(other, r, seq)]);
    (m.items[seq] as Item).acked = true;
    await settle(m, r, got, [
      serial(m, [
        [1, (c) => join(c, seq, now())],
        [0, (c) => send(c, now())],
      ]),
      serial(m, [
        [0, (c) => send(c, now())],
        [1, (c) => join(c, seq, now())],
      ]),
      // The join held the digest it went into (FOR UPDATE) when the send passed it (SKIP LOCKED).
      ...(fresh
        ? [
            serial(m, [
              [1, (c) => join(c, seq, now())],
              [0, (c) => send(c, now(), (c.items[seq] as Item).digest)],
            ]),
          ]
        : []),
    ]);
  }),
);

const cancelItem = fc.nat().map((n) =>
  command(`cancel(#${n})`, hasItems, async (m, r) => {
    const seq = pick(m, n);
    const got = await cancelDigestItem(database, { id: (m.items[seq] as Item).id, clientId: "shop", at: clock.now });
    assert.equal(got, cancel(m, seq));
    await verify(m, r);
  }),
);

const sendWhileCanceling = fc.nat().map((n) =>
  command(`sendDigests(on 0) while canceling #${n}`, hasItems, async (m, r) => {
    const seq = pick(m, n);
    const joined = (m.items[seq] as Item).digest;
    const got = await Promise.all([
      sendDigests(first),
      cancelDigestItem(second, { id: (m.items[seq] as Item).id, clientId: "shop", at: clock.now }),
    ]);
    await settle(m, r, got, [
      serial(m, [
        [1, (c) => cancel(c, seq)],
        [0, (c) => send(c, now())],
      ]),
      serial(m, [
        [0, (c) => send(c, now())],
        [1, (c) => cancel(c, seq)],
      ]),
      // The cancel held the item's digest (FOR UPDATE) when the send passed it (SKIP LOCKED).
      ...(joined === null
        ? []
        : [
            serial(m, [
              [1, (c) => cancel(c, seq)],
              [0, (c) => send(c, now(), joined)],
            ]),
          ]),
    ]);
  }),
);

// A processor killed inside the join's transaction: nothing joined, the lane message comes back.
const crashJoin = fc.record({ n: fc.nat(), killAt: fc.nat(5) }).map(({ n, killAt }) =>
  command(
    `routeAndDie(unrouted #${n}, at statement ${killAt})`,
    (m) => m.items.some((i) => i.digest === null),
    async (m, r) => {
      const unrouted = m.items.flatMap((item, seq) => (item.digest === null ? [seq] : []));
      const seq = unrouted[n % unrouted.length] as number;
      const [got] = await outcomes([route(crashing(killAt), r, seq)]);
      assert.ok(got && "failed" in got, `the transaction was killed, not ${answer(got as never)}`);
      await verify(m, r);
    },
  ),
);

// A processor killed inside the send's transaction: nothing sent, the next round sends it.
const crashSend = fc.nat(8).map((killAt) =>
  command(`sendDigestsAndDie(at statement ${killAt})`, hasItems, async (m, r) => {
    const [got] = await outcomes([sendDigests(crashing(killAt))]);
    assert.ok(got && "failed" in got, "the transaction was killed");
    await verify(m, r);
  }),
);

// A processor killed after the send committed, before it published: the notifications are
// stored, their lane messages lost; the reconciler routes them (the run's end does, as it would).
const lostPublish = fc.constant(
  command("sendDigestsLosingPublishes", hasItems, async (m, r) => {
    const stored = await sendDueDigests(database, { now: clock.now, limit: 100, partitions: bus.naming.partitions });
    r.lost.push(...stored.map((s) => s.message));
    assert.equal(stored.length, send(m, now()), "digests sent");
    await verify(m, r);
  }),
);

// --- Runs ------------------------------------------------------------------------------------

let runs = 0;
const firstRun = new Date("2026-07-01T08:00:00Z").getTime();

async function newRun(): Promise<{ model: Model; real: Real }> {
  const run = runs++;
  // Days apart: nothing of a run is due in another's.
  clock.now = new Date(firstRun + run * 2 * 86_400_000);
  const users = Array.from({ length: USERS }, (_, i) => `dm${run}-u${i}`);
  for (const user of users) await seedUser(database, user);
  // What a failed run left (its counterexample's shrinking runs again) goes now.
  while ((await sendDigests(first)) > 0);
  return { model: { items: [], digests: [] }, real: { users, messages: [], seqOf: new Map(), lost: [] } };
}

/** The end of a run: every lane message delivered, every window over, every digest sent once. */
async function finish(m: Model, r: Real): Promise<void> {
  for (const [seq, item] of m.items.entries())
    if (!item.acked) assert.equal(await route(first, r, seq), join(m, seq, now()), "the redelivery");
  clock.now = new Date(now() + WINDOW_MS);
  assert.equal(await sendDigests(first), send(m, now()), "every digest sent at last");
  await verify(m, r);
  assert.ok(
    m.items.every((i) => i.digest !== null),
    "every item joined a digest",
  );
  assert.ok(
    m.digests.every((d) => d.status === "sent"),
    "every digest sent",
  );

  // Every item not canceled is in exactly one sent notification, the canceled in none.
  const rows = await observe(r);
  const listed = rows.flatMap((row) =>
    row.notifications.flatMap((n) => (n.data as { items: Array<{ seq: number }> }).items.map((i) => i.seq)),
  );
  assert.deepEqual(
    listed.sort((a, b) => a - b),
    m.items.flatMap((item, seq) => (item.canceled ? [] : [seq])),
    "every item not canceled is sent in exactly one digest",
  );

  // Routed, each digest's notification queues exactly one email, and no item does on its own.
  const published = (await lanes()).filter((l) => r.users.includes(l.data.user_id)).map((l) => l.data);
  for (const message of published) assert.equal(await routeNotification(first, message), "routed");
  for (const message of r.lost) assert.equal(await routeNotification(other, message), "routed", "the reconciler's");
  const digestNotifications = rows.flatMap((row) => row.notifications.map((n) => n.id));
  const ours = new Set([...digestNotifications, ...m.items.map((i) => i.id)]);
  const queued = (await works()).filter((w) => ours.has(w.data.notification_id));
  assert.deepEqual(
    queued.map((w) => w.data.notification_id).sort(),
    [...digestNotifications].sort(),
    "one work item per digest notification",
  );
  for (const w of queued) {
    const row = rows.find((x) => x.notification_id === w.data.notification_id);
    assert.equal(w.data.subject, `${row?.item_count} new comments`);
  }
}

t.test("digests: every item in exactly one digest, each digest sent once and never early", async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.commands(
        [
          // Accepts weigh more: most other steps need items.
          accept,
          accept,
          accept,
          accept,
          accept,
          accept,
          redeliver,
          routeTwice,
          routePair,
          advance,
          sendDue,
          sendWhileRouting,
          cancelItem,
          sendWhileCanceling,
          crashJoin,
          crashSend,
          lostPublish,
        ],
        { maxCommands: 30, size: "medium" },
      ),
      async (commands) => {
        const run = await newRun();
        await fc.asyncModelRun(() => run, commands);
        await finish(run.model, run.real);
      },
    ),
    { numRuns: RUNS },
  );

  // Across every run: one work item per notification and channel on the work stream.
  const all = await workItems(bus);
  const keys = all.map((w) => `${w.item.notification_id}:${w.item.channel}`);
  t.equal(new Set(keys).size, keys.length, "no notification queued twice on a channel");
  t.ok(keys.length > 0, "digests were sent and routed");
});
