import { randomUUID } from "node:crypto";
import { CHANNEL_STATUSES, type ChannelStatus, statusesMovableTo } from "@notify/core";
import { countingDatabase, freshDatabase, seedNotification } from "@notify/testing";
import fc from "fast-check";
import t from "tap";
import type { ChannelRef } from "../src/channel-ref.js";
import { moveStatus, type StatusFields } from "../src/delivery/status.js";
import { type Routing, recordRoutedChannels } from "../src/routing/channels.js";

const { database, url } = await freshDatabase(t);
const { sql } = database;

/** Fresh notifications with one email channel each, pending. */
async function channels(n: number): Promise<ChannelRef[]> {
  const ids = Array.from({ length: n }, () => randomUUID());
  await Promise.all(ids.map((id) => seedNotification(database, { id, clientId: "c", userId: "u" })));
  await sql`insert into notification_channels ${sql(
    ids.map((id) => ({ notification_id: id, channel: "email", status: "pending", attempts: 0 })),
  )}`;
  return ids.map((id) => ({ notification_id: id, channel: "email" as const }));
}

/** A channel's state, its history and its attempt lines, without ids or times. */
async function stateOf(ref: ChannelRef) {
  const [row] = await sql`select status, reason, provider, provider_id, attempts, next_attempt_at
    from notification_channels where notification_id = ${ref.notification_id} and channel = ${ref.channel}`;
  const history = await sql`select status, reason, attempt, provider_id from channel_status_events
    where notification_id = ${ref.notification_id} and channel = ${ref.channel} order by id`;
  const attempts = await sql`select attempt, outcome, provider, provider_id, error from delivery_attempts
    where notification_id = ${ref.notification_id} and channel = ${ref.channel} order by attempt`;
  return { row: { ...row }, history: history.map((h) => ({ ...h })), attempts: attempts.map((a) => ({ ...a })) };
}

const delivered = (attempt: number, providerId: string): StatusFields => ({
  provider: "sendgrid",
  providerId,
  attempts: attempt,
  reason: "accepted",
  attempt: { attempt, outcome: "accepted", provider: "sendgrid", providerId, error: null },
});

t.test("the moves of one iteration go in one statement, each answered for itself", async (t) => {
  const counted = await countingDatabase(t, url);
  const refs = await channels(5);
  const [a, b, c, d, e] = refs as [ChannelRef, ChannelRef, ChannelRef, ChannelRef, ChannelRef];
  await sql`update notification_channels set status = 'delivered' where notification_id = ${d.notification_id}`;
  const retryAt = new Date("2030-01-01T00:00:00Z");
  const answers = await Promise.all([
    moveStatus(counted.sql, a, "delivered", delivered(1, "p-a")),
    moveStatus(counted.sql, b, "retrying", {
      reason: "sendgrid 503",
      attempts: 1,
      nextAttemptAt: retryAt,
      attempt: { attempt: 1, outcome: "transient", provider: "sendgrid", providerId: null, error: "sendgrid 503" },
    }),
    moveStatus(counted.sql, c, "failed", { reason: "hard bounce", attempts: 0 }),
    // Already delivered: refused, logs nothing, but its attempt line is kept.
    moveStatus(counted.sql, d, "retrying", {
      reason: "late",
      attempts: 2,
      attempt: { attempt: 2, outcome: "transient", provider: "sendgrid", providerId: null, error: "late" },
    }),
    moveStatus(counted.sql, e, "parked", { reason: "breaker open", nextAttemptAt: retryAt }),
  ]);
  t.equal(counted.statements(), 1, "five moves, one statement");
  t.same(answers, [true, true, true, false, true]);
  t.match(await stateOf(a), {
    row: { status: "delivered", provider: "sendgrid", provider_id: "p-a", attempts: 1, reason: "accepted" },
    history: [{ status: "delivered", attempt: 1, provider_id: "p-a" }],
    attempts: [{ attempt: 1, outcome: "accepted", provider: "sendgrid", provider_id: "p-a" }],
  });
  t.match(await stateOf(b), {
    row: { status: "retrying", reason: "sendgrid 503", attempts: 1, next_attempt_at: retryAt },
    history: [{ status: "retrying", reason: "sendgrid 503", attempt: 1 }],
    attempts: [{ attempt: 1, outcome: "transient", error: "sendgrid 503" }],
  });
  t.match(await stateOf(c), { row: { status: "failed", reason: "hard bounce" }, history: [{ status: "failed" }] });
  t.match(await stateOf(d), {
    row: { status: "delivered", attempts: 0 },
    history: [],
    attempts: [{ attempt: 2, outcome: "transient" }],
  });
  t.match(await stateOf(e), { row: { status: "parked", attempts: 0, next_attempt_at: retryAt }, history: [{}] });
});

t.test("two moves of one channel in one iteration apply in call order", async (t) => {
  const counted = await countingDatabase(t, url);
  const [ref] = (await channels(1)) as [ChannelRef];
  const answers = await Promise.all([
    moveStatus(counted.sql, ref, "retrying", { reason: "timeout", attempts: 1 }),
    moveStatus(counted.sql, ref, "delivered", delivered(2, "p-2")),
    moveStatus(counted.sql, ref, "retrying", { reason: "too late", attempts: 3 }),
  ]);
  t.same(answers, [true, true, false]);
  t.match(await stateOf(ref), {
    row: { status: "delivered", attempts: 2 },
    history: [{ status: "retrying" }, { status: "delivered" }],
  });
});

t.test("a move of a channel not in the log moves nothing; the others of its batch are moved", async (t) => {
  const counted = await countingDatabase(t, url);
  const refs = await channels(3);
  const gone: ChannelRef = { notification_id: randomUUID(), channel: "email" };
  const results = await Promise.allSettled([
    moveStatus(counted.sql, refs[0] as ChannelRef, "delivered", delivered(1, "p-0")),
    // No channel row to move (the log has no foreign keys: nothing refuses the statement).
    moveStatus(counted.sql, gone, "delivered", delivered(1, "p-gone")),
    moveStatus(counted.sql, refs[1] as ChannelRef, "delivered", delivered(1, "p-1")),
    moveStatus(counted.sql, refs[2] as ChannelRef, "failed", { reason: "bounce", attempts: 1 }),
  ]);
  t.same(
    results.map((r) => (r.status === "fulfilled" ? r.value : r.reason)),
    [true, false, true, true],
  );
  t.same(
    (await Promise.all(refs.map(stateOf))).map((s) => s.row.status),
    ["delivered", "delivered", "failed"],
  );
});

/** A move as one statement of its own did it before batching: the reference. */
async function moveAlone(ref: ChannelRef, to: ChannelStatus, fields: StatusFields): Promise<boolean> {
  const a = fields.attempt;
  const rows = await sql`
    with tried as (
      insert into delivery_attempts (notification_id, channel, attempt, outcome, provider, provider_id, error)
      select ${ref.notification_id}, ${ref.channel}, ${a?.attempt ?? null}::int, ${a?.outcome ?? null}, ${a?.provider ?? null}, ${a?.providerId ?? null}, ${a?.error ?? null}
      where ${a !== undefined}
      on conflict do nothing
    ), moved as (
      update notification_channels set
        status = ${to},
        reason = ${fields.reason ?? null},
        provider = coalesce(${fields.provider ?? null}, provider),
        provider_id = coalesce(${fields.providerId ?? null}, provider_id),
        attempts = coalesce(${fields.attempts ?? null}, attempts),
        next_attempt_at = ${fields.nextAttemptAt ?? null},
        updated_at = now()
      where notification_id = ${ref.notification_id} and channel = ${ref.channel}
        and status = any(${statusesMovableTo(to)})
      returning notification_id, channel, status, reason, attempts, provider_id, updated_at
    )
    insert into channel_status_events (notification_id, channel, status, reason, attempt, provider_id, at)
    select notification_id, channel, status, reason, attempts, provider_id, updated_at from moved`;
  return rows.count > 0;
}

t.test("any moves in one iteration end as the same moves did one statement each (fast-check)", async (t) => {
  const counted = await countingDatabase(t, url);
  const CHANNELS = 8;
  const move = fc.record({
    channel: fc.nat(CHANNELS - 1),
    to: fc.constantFrom(...(CHANNEL_STATUSES.filter((s) => s !== "pending") as ChannelStatus[])),
    from: fc.constantFrom(...CHANNEL_STATUSES),
    attempts: fc.option(fc.nat(5), { nil: undefined }),
    reason: fc.option(fc.constantFrom("a", "b"), { nil: null }),
    provider: fc.option(fc.constantFrom("sendgrid", "smtp"), { nil: undefined }),
    providerId: fc.option(fc.constantFrom("p1", "p2"), { nil: undefined }),
    tried: fc.option(fc.nat(3), { nil: undefined }),
    retryAt: fc.option(fc.constant(new Date("2031-01-01T00:00:00Z")), { nil: undefined }),
  });
  type Generated = typeof move extends fc.Arbitrary<infer T> ? T : never;
  const fields = (m: Generated): StatusFields => ({
    reason: m.reason,
    ...(m.attempts === undefined ? {} : { attempts: m.attempts }),
    ...(m.provider === undefined ? {} : { provider: m.provider }),
    ...(m.providerId === undefined ? {} : { providerId: m.providerId }),
    ...(m.retryAt === undefined ? {} : { nextAttemptAt: m.retryAt }),
    ...(m.tried === undefined
      ? {}
      : { attempt: { attempt: m.tried, outcome: "transient", provider: "sendgrid", providerId: null, error: "x" } }),
  });
  // Moves of distinct channels (one statement); then any moves, repeats included (in rounds).
  const distinct = fc.uniqueArray(move, { selector: (m) => m.channel, maxLength: CHANNELS });
  const any = fc.array(move, { maxLength: 12 });
  await fc.assert(
    fc.asyncProperty(fc.oneof(distinct, any), async (moves) => {
      const batched = await channels(CHANNELS);
      const alone = await channels(CHANNELS);
      // Each channel starts from the status its first move names, in both sets.
      const start = new Map(moves.map((m) => [m.channel, m.from] as const).reverse());
      for (const [channel, status] of start) {
        for (const set of [batched, alone]) {
          await sql`update notification_channels set status = ${status}
            where notification_id = ${(set[channel] as ChannelRef).notification_id}`;
        }
      }
      const together = await Promise.all(
        moves.map((m) => moveStatus(counted.sql, batched[m.channel] as ChannelRef, m.to, fields(m))),
      );
      const inTurn: boolean[] = [];
      for (const m of moves) inTurn.push(await moveAlone(alone[m.channel] as ChannelRef, m.to, fields(m)));
      t.same(together, inTurn);
      for (let i = 0; i < CHANNELS; i++) {
        t.same(await stateOf(batched[i] as ChannelRef), await stateOf(alone[i] as ChannelRef));
      }
    }),
    { numRuns: 40 },
  );
});

/** A fresh notification of `user` (accepted at `at`), not routed yet. */
async function unrouted(user: string, at = new Date()): Promise<string> {
  const id = randomUUID();
  await seedNotification(database, { id, clientId: "c", userId: user, createdAt: at });
  return id;
}

const routing = (id: string, user: string, extra: Partial<Routing> = {}): Routing => ({
  notificationId: id,
  clientId: "c",
  userId: user,
  priority: "transactional",
  channels: [{ channel: "email", status: "pending", reason: null, nextAttemptAt: null }],
  deferredUntil: null,
  cap: null,
  ...extra,
});

const channelsOf = async (id: string) =>
  (await sql`select channel, status from notification_channels where notification_id = ${id} order by channel`).map(
    (r) => ({ ...r }),
  );

t.test("the routings of one iteration go in one statement, each answered for itself", async (t) => {
  const counted = await countingDatabase(t, url);
  const [a, b, c, again] = await Promise.all(["ra", "rb", "rc", "rd"].map((u) => unrouted(u)));
  await recordRoutedChannels(counted, routing(again as string, "rd"));
  const later = new Date(Date.now() + 3_600_000);
  const start = counted.statements();
  const answers = await Promise.all([
    recordRoutedChannels(counted, routing(a as string, "ra")),
    recordRoutedChannels(
      database,
      routing(b as string, "rb", {
        channels: [
          { channel: "email", status: "deferred", reason: "quiet_hours", nextAttemptAt: later },
          { channel: "sms", status: "suppressed", reason: "opted_out", nextAttemptAt: null },
        ],
        deferredUntil: later,
      }),
    ),
    recordRoutedChannels(counted, routing(c as string, "rc", { order: "hold" })),
    recordRoutedChannels(counted, routing(again as string, "rd")),
  ]);
  t.equal(counted.statements() - start, 1, "four routings, one statement");
  const routed = { first: true, capped: false, throttled: false, held: false, earlier: null };
  t.same(answers, [routed, routed, routed, { ...routed, first: false }]);
  t.same(await channelsOf(b as string), [
    { channel: "email", status: "deferred" },
    { channel: "sms", status: "suppressed" },
  ]);
  const [timer] = await sql`select due_at from deferred_notifications where notification_id = ${b as string}`;
  t.same(timer?.due_at, later, "the deferral timer went in with its rows");
  t.same(await channelsOf(again as string), [{ channel: "email", status: "pending" }]);
});

t.test("two routings of one user's lane in one iteration are recorded in turn", async (t) => {
  const counted = await countingDatabase(t, url);
  const older = await unrouted("ordered", new Date(Date.now() - 1000));
  const newer = await unrouted("ordered");
  const held = await unrouted("ordered-held", new Date(Date.now() - 1000));
  const waits = await unrouted("ordered-held");
  const answers = await Promise.all([
    recordRoutedChannels(counted, routing(older, "ordered")),
    // In turn, the older one is routed by now: the newer one does not wait.
    recordRoutedChannels(counted, routing(newer, "ordered", { order: "hold" })),
    // Its previous notification is not routed (nor being routed): it waits.
    recordRoutedChannels(counted, routing(waits, "ordered-held", { order: "hold" })),
  ]);
  t.same(answers, [
    { first: true, capped: false, throttled: false, held: false, earlier: null },
    { first: true, capped: false, throttled: false, held: false, earlier: null },
    { first: false, capped: false, throttled: false, held: true, earlier: held },
  ]);
  t.same(await channelsOf(waits), [], "a held routing writes nothing");
});

t.test("a routing of a notification no longer in the log writes nothing; the others are recorded", async (t) => {
  const counted = await countingDatabase(t, url);
  const [a, b] = await Promise.all(["fa", "fb"].map((u) => unrouted(u)));
  const gone = randomUUID();
  const results = await Promise.allSettled([
    recordRoutedChannels(counted, routing(a as string, "fa")),
    // Removed by ingest's compensation: nothing to route, and no channel row left behind.
    recordRoutedChannels(counted, routing(gone, "fgone")),
    recordRoutedChannels(counted, routing(b as string, "fb")),
  ]);
  t.same(
    results.map((r) => r.status),
    ["fulfilled", "fulfilled", "fulfilled"],
  );
  t.match(results[1], { value: { gone: true, first: false } });
  t.same(await channelsOf(gone), [], "no channel row for a notification not in the log");
  t.same(await channelsOf(a as string), [{ channel: "email", status: "pending" }]);
  t.same(await channelsOf(b as string), [{ channel: "email", status: "pending" }]);
});
