import assert from "node:assert/strict";
import type { Channel, LaneMessage, WorkItem } from "@notify/core";
import { createDb } from "@notify/db";
import fc from "fast-check";
import t from "tap";
import { laneDeps } from "../src/consumers.js";
import { type ReleaseResult, releaseDue } from "../src/deferral/release.js";
import type { RouteDeps } from "../src/routing/plan.js";
import { routeNotification } from "../src/routing/route.js";
import { processorFixture, seedUser, storeNotifications, workItems } from "./helpers.js";
import { dyingDatabase, losingBus, outcomes, streamTail } from "./model-helpers.js";

// Model-based property test of scheduled sends against the real Postgres and NATS: random
// interleavings of accepts (send times past and to come), redeliveries, one message routed by two
// processors at once, releases on one or two processors, processors killed inside the release's
// transaction or losing their publishes, and the clock moving, compared after every step with a
// small model: a work item goes out for a channel only once its send time has come (checked
// against the clock of the step that published it), exactly once, and by the end every
// notification is out. Each run has users of its own and a clock days after the last run's.

const USERS = 2;
const RUNS = Number(process.env.MODEL_RUNS ?? 25);

const { url, database, bus, clock, deps } = await processorFixture(t);
// Two processors with pools of their own, and one whose connection dies in its transaction.
const second = createDb({ url, max: 4 });
const doomed = createDb({ url, max: 2 });
t.teardown(() => Promise.all([second.close(), doomed.close()]));
const processors: RouteDeps[] = [
  await laneDeps(deps, "transactional"),
  await laneDeps({ ...deps, databases: { transactional: second, promotional: second } }, "transactional"),
];
const [first, other] = processors as [RouteDeps, RouteDeps];
const dying = (killAt: number): RouteDeps => ({ ...first, database: dyingDatabase(doomed, killAt) });
const losing: RouteDeps = { ...first, bus: losingBus(bus) };
const works = await streamTail<WorkItem>(bus, bus.streams.work);

// --- The model -------------------------------------------------------------------------------

interface Note {
  id: string;
  sendAt: number;
  channels: Channel[];
  /** Its channel rows: none (not routed), deferred (scheduled), or pending (routed at or after its time). */
  rows: null | "deferred" | "pending";
  /** Its deferral timer is set (held until its send time). */
  timer: boolean;
  /** A work item went out for each of its channels. */
  queued: boolean;
  /** A release that died before its commit may have published its work items. */
  maybe: boolean;
  /** Its lane message was routed to the end (else it is delivered again). */
  acked: boolean;
}

interface Model {
  notes: Note[];
}

interface Real {
  users: string[];
  messages: LaneMessage[];
  /** Work items seen on the stream, per notification and channel. */
  counts: Map<string, number>;
  /** The notification of a work item, by id. */
  seqOf: Map<string, number>;
}

/**
 * A lane message routed by a processor whose publishes go through (or are lost): "throws" when
 * it had something to publish and lost it.
 */
function route(m: Model, seq: number, now: number, publishes = true): "routed" | "duplicate" | "throws" {
  const note = m.notes[seq] as Note;
  const result = note.rows === null ? "routed" : "duplicate";
  if (note.rows === null) {
    note.rows = note.sendAt > now ? "deferred" : "pending";
    note.timer = note.rows === "deferred";
  }
  // A redelivery publishes what is recorded pending; a held or released one nothing.
  if (note.rows !== "pending") return result;
  if (!publishes) return "throws";
  note.queued = true;
  return result;
}

/** Every held notification whose time has come goes out; its channels stay deferred until a worker moves them. */
function release(m: Model, now: number): ReleaseResult {
  const due = m.notes.filter((n) => n.timer && n.sendAt <= now);
  for (const note of due) {
    note.timer = false;
    note.queued = true;
  }
  return { settled: due.length, published: due.reduce((a, n) => a + n.channels.length, 0), redeferred: 0 };
}

// --- Checks ----------------------------------------------------------------------------------

const now = () => clock.now.getTime();
const iso = (ms: number) => new Date(ms).toISOString();

/** After a step: what it published was due, nothing went twice, and Postgres holds what the model says. */
async function verify(m: Model, r: Real): Promise<void> {
  for (const { data: item } of await works()) {
    const seq = r.seqOf.get(item.notification_id);
    if (seq === undefined) continue;
    const note = m.notes[seq] as Note;
    assert.ok(
      note.sendAt <= now(),
      `work item for #${seq} (send at ${iso(note.sendAt)}) published early, at ${clock.now.toISOString()}`,
    );
    assert.ok(note.channels.includes(item.channel), `work item for #${seq} on ${item.channel}, not requested`);
    const key = `${item.notification_id}:${item.channel}`;
    r.counts.set(key, (r.counts.get(key) ?? 0) + 1);
  }
  const ids = m.notes.map((n) => n.id);
  const timers = new Map(
    (
      await database.sql<{ notification_id: string; due_at: Date }[]>`
        select notification_id, due_at from deferred_notifications where notification_id = any(${ids})`
    ).map((row) => [row.notification_id, iso(row.due_at.getTime())]),
  );
  const rows = await database.sql<
    { notification_id: string; channel: Channel; status: string; reason: string | null; next_attempt_at: Date | null }[]
  >`select notification_id, channel, status, reason, next_attempt_at from notification_channels
    where notification_id = any(${ids}) order by notification_id, channel`;
  for (const [seq, note] of m.notes.entries()) {
    const where = `#${seq} (send at ${iso(note.sendAt)}, now ${clock.now.toISOString()})`;
    for (const channel of note.channels) {
      const n = r.counts.get(`${note.id}:${channel}`) ?? 0;
      if (note.queued) assert.equal(n, 1, `${where}: one work item on ${channel}`);
      else if (note.maybe) assert.ok(n <= 1, `${where}: at most one work item on ${channel}`);
      else assert.equal(n, 0, `${where}: no work item on ${channel} yet`);
    }
    assert.equal(timers.get(note.id), note.timer ? iso(note.sendAt) : undefined, `${where}: its timer`);
    const mine = rows
      .filter((row) => row.notification_id === note.id)
      .map((row) => [row.channel, row.status, row.reason, row.next_attempt_at?.toISOString() ?? null]);
    const expected =
      note.rows === null
        ? []
        : [...note.channels]
            .sort()
            .map((c) =>
              note.rows === "deferred" ? [c, "deferred", "scheduled", iso(note.sendAt)] : [c, "pending", null, null],
            );
    assert.deepEqual(mine, expected, `${where}: its channels`);
  }
}

// --- Commands --------------------------------------------------------------------------------

type Cmd = fc.AsyncCommand<Model, Real>;
const pick = (m: Readonly<Model>, n: number) => n % m.notes.length;
const hasNotes = (m: Readonly<Model>) => m.notes.length > 0;
const dueNow = (m: Readonly<Model>) => m.notes.filter((n) => n.timer && n.sendAt <= now());
const routeOn = (p: RouteDeps, r: Real, seq: number) => routeNotification(p, r.messages[seq] as LaneMessage);
const answer = (o: { ok: unknown } | { failed: unknown }) => ("ok" in o ? o.ok : "throws");
const sum = (results: readonly ReleaseResult[]): ReleaseResult => ({
  settled: results.reduce((a, x) => a + x.settled, 0),
  published: results.reduce((a, x) => a + x.published, 0),
  redeferred: results.reduce((a, x) => a + x.redeferred, 0),
});

function command(name: string, check: (m: Readonly<Model>) => boolean, run: (m: Model, r: Real) => Promise<void>): Cmd {
  return { check, run, toString: () => name };
}

const accept = fc
  .record({
    user: fc.nat(USERS - 1),
    // Seconds from now; now itself and the past included.
    offset: fc.oneof(fc.constant(0), fc.integer({ min: -1800, max: 5400 })),
    channels: fc.constantFrom<Channel[]>(["email"], ["sms"], ["email", "sms"], ["email", "push"]),
    on: fc.constantFrom(0, 1, null),
  })
  .map(({ user, offset, channels, on }) =>
    command(
      `accept(u${user}, send in ${offset}s, ${channels.join("+")}, ${on === null ? "in flight" : `routed on ${on}`})`,
      () => true,
      async (m, r) => {
        const seq = m.notes.length;
        const sendAt = now() + offset * 1000;
        const [message] = await storeNotifications(database, bus, [
          { user_id: r.users[user] as string, priority: "transactional", send_at: iso(sendAt), channels },
        ]);
        if (!message) throw new Error("not stored");
        r.messages.push(message);
        r.seqOf.set(message.notification_id, seq);
        m.notes.push({
          id: message.notification_id,
          sendAt,
          channels,
          rows: null,
          timer: false,
          queued: false,
          maybe: false,
          acked: false,
        });
        if (on !== null) {
          assert.equal(await routeOn(processors[on] as RouteDeps, r, seq), route(m, seq, now()));
          (m.notes[seq] as Note).acked = true;
        }
        await verify(m, r);
      },
    ),
  );

const redeliver = fc.record({ n: fc.nat(), on: fc.constantFrom(0, 1) }).map(({ n, on }) =>
  command(`redeliver(#${n}, on ${on})`, hasNotes, async (m, r) => {
    const seq = pick(m, n);
    assert.equal(await routeOn(processors[on] as RouteDeps, r, seq), route(m, seq, now()));
    (m.notes[seq] as Note).acked = true;
    await verify(m, r);
  }),
);

const routeTwice = fc.nat().map((n) =>
  command(`routeOnBoth(#${n})`, hasNotes, async (m, r) => {
    const seq = pick(m, n);
    const got = await Promise.all([routeOn(first, r, seq), routeOn(other, r, seq)]);
    const expected = [route(m, seq, now()), route(m, seq, now())];
    assert.deepEqual([...got].sort(), expected.sort(), "one routes it, the other finds it routed");
    (m.notes[seq] as Note).acked = true;
    await verify(m, r);
  }),
);

// Routed by a processor that dies before its publishes reach NATS: the lane message comes back.
const routeLosing = fc.nat().map((n) =>
  command(`routeLosingPublishes(#${n})`, hasNotes, async (m, r) => {
    const seq = pick(m, n);
    const [got] = await outcomes([routeOn(losing, r, seq)]);
    const expected = route(m, seq, now(), false);
    assert.equal(answer(got as never), expected);
    if (expected !== "throws") (m.notes[seq] as Note).acked = true;
    await verify(m, r);
  }),
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

// To a held notification's send time, or a millisecond either side of it (never back).
const advanceToSendAt = fc.record({ n: fc.nat(), delta: fc.constantFrom(-1, 0, 1) }).map(({ n, delta }) =>
  command(
    `advanceToSendAt(held #${n} ${delta < 0 ? "- 1ms" : delta > 0 ? "+ 1ms" : ""})`,
    (m) => m.notes.some((note) => note.timer),
    async (m, r) => {
      const held = m.notes.filter((note) => note.timer);
      const target = (held[n % held.length] as Note).sendAt + delta;
      if (target > now()) clock.now = new Date(target);
      await verify(m, r);
    },
  ),
);

const releaseDueOn = fc.boolean().map((both) =>
  command(`releaseDue(${both ? "on both at once" : "on 0"})`, hasNotes, async (m, r) => {
    const got = both ? sum(await Promise.all([releaseDue(first), releaseDue(other)])) : await releaseDue(first);
    const expected = release(m, now());
    await verify(m, r);
    assert.deepEqual(got, expected);
  }),
);

const releaseWhileRouting = fc.nat().map((n) =>
  command(`releaseDue(on 0) while routing #${n} on 1`, hasNotes, async (m, r) => {
    const seq = pick(m, n);
    const [released, routed] = await Promise.all([releaseDue(first), routeOn(other, r, seq)]);
    // A note is released only from its timer, routed only from its lane message: they do not meet.
    const expected = [route(m, seq, now()), release(m, now())];
    (m.notes[seq] as Note).acked = true;
    await verify(m, r);
    assert.deepEqual([routed, released], expected);
  }),
);

// A processor killed inside the release's transaction (at a statement, or when it would commit,
// after its publishes): nothing settled, the timers stay due; what it published may be out.
const releaseDying = fc.nat(6).map((killAt) =>
  command(
    `releaseDueAndDie(at statement ${killAt})`,
    (m) => dueNow(m).length > 0,
    async (m, r) => {
      const due = dueNow(m);
      const [got] = await outcomes([releaseDue(dying(killAt))]);
      assert.ok(got && "failed" in got, "the transaction was killed");
      for (const note of due) note.maybe = true;
      await verify(m, r);
    },
  ),
);

// A release whose publishes are lost: it does not commit, the timers stay due.
const releaseLosing = fc.constant(
  command(
    "releaseDueLosingPublishes",
    (m) => dueNow(m).length > 0,
    async (m, r) => {
      const [got] = await outcomes([releaseDue(losing)]);
      assert.ok(got && "failed" in got, "the release failed");
      await verify(m, r);
    },
  ),
);

// --- Runs ------------------------------------------------------------------------------------

let runs = 0;
const firstRun = new Date("2026-08-01T08:00:00Z").getTime();

async function newRun(): Promise<{ model: Model; real: Real }> {
  const run = runs++;
  // Days apart: nothing of a run is due in another's.
  clock.now = new Date(firstRun + run * 2 * 86_400_000);
  const users = Array.from({ length: USERS }, (_, i) => `sm${run}-u${i}`);
  for (const user of users) await seedUser(database, user);
  // What a failed run left (its counterexample's shrinking runs again) goes now.
  while ((await releaseDue(first)).settled > 0);
  await works();
  return { model: { notes: [] }, real: { users, messages: [], counts: new Map(), seqOf: new Map() } };
}

/** The end of a run: every lane message delivered, the clock at the last send time, one release. */
async function finish(m: Model, r: Real): Promise<void> {
  for (const [seq, note] of m.notes.entries())
    if (!note.acked) assert.equal(await routeOn(first, r, seq), route(m, seq, now()), "the redelivery");
  const last = Math.max(now(), ...m.notes.map((n) => n.sendAt));
  clock.now = new Date(last);
  assert.deepEqual(await releaseDue(first), release(m, now()), "the last release");
  await verify(m, r);
  assert.ok(
    m.notes.every((n) => n.queued),
    "every scheduled notification is out",
  );
}

t.test("scheduled sends: each channel queued exactly once, never before its send time", async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.commands(
        [
          // Accepts weigh more: most other steps need notifications.
          accept,
          accept,
          accept,
          accept,
          redeliver,
          routeTwice,
          routeLosing,
          advance,
          advanceToSendAt,
          advanceToSendAt,
          releaseDueOn,
          releaseDueOn,
          releaseWhileRouting,
          releaseDying,
          releaseDying,
          releaseLosing,
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
  t.ok(keys.length > 0, "scheduled notifications were sent");
});
