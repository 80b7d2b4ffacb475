import { randomUUID } from "node:crypto";
import type { StoredLetter } from "@notify/bus";
import { type Channel, type DeadLetter, type GuardValue, guardKey, type WorkItem } from "@notify/core";
import { freshBus, freshDatabase } from "@notify/testing";
import t from "tap";
import {
  channelStates,
  latestPerChannel,
  matchesFilters,
  planReplay,
  REPLAY_REASON,
  readDeadLetters,
  reasonMatches,
  replay,
  replayDeadLetters,
  showDeadLetter,
  statusNow,
} from "../src/index.js";

// The DLQ operations against a fresh database and NATS namespace; `notify dlq` (libs/cli) and
// GET /api/v1/dead-letters print what these answer. Dead letters are written here the way the
// workers write them.
const { database } = await freshDatabase(t);
const bus = await freshBus(t);
const guard = await bus.kv("notify_send_guard");
const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

async function deadLetter(
  options: {
    channel?: Channel;
    reason?: string;
    cls?: DeadLetter["class"];
    userId?: string;
    deliverBy?: string;
    /** The client its work item names (a letter written before items named theirs names none). */
    client?: string;
  } = {},
): Promise<{ item: WorkItem; seq: number }> {
  const id = randomUUID();
  const channel = options.channel ?? "email";
  const userId = options.userId ?? `user-${randomUUID()}`;
  const cls = options.cls ?? "permanent";
  const reason = options.reason ?? "sendgrid 400: Does not contain a valid address.";
  await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, ${options.client ?? "shop"}, ${userId}, 'account', 'welcome', 'transactional', '{}', ${id}, 'h', 0)`;
  await database.sql`insert into notification_channels (notification_id, channel, status, reason, attempts)
    values (${id}, ${channel}, ${cls === "outcome_unknown" ? "unsettled" : "failed"}, ${reason}, 1)`;
  const guardValue: GuardValue = { state: "dead", at: Date.now(), attempt: 1, class: cls, reason };
  await guard.put(guardKey(id, channel), encode(guardValue));
  const item: WorkItem = {
    notification_id: id,
    channel,
    priority: "transactional",
    ...(options.client === undefined ? {} : { client_id: options.client }),
    user_id: userId,
    category: "account",
    to: "old@example.com",
    subject: "Welcome",
    body: "<p>Hello</p>",
    attempt: 0,
    ...(options.deliverBy === undefined ? {} : { deliver_by: options.deliverBy }),
  };
  const letter: DeadLetter = {
    version: 1,
    class: cls,
    reason,
    channel,
    lane: "transactional",
    provider: "sendgrid",
    attempts: 1,
    notification: null,
    item,
    history: [],
    dead_lettered_at: new Date().toISOString(),
  };
  const { seq } = await bus.publish(bus.subjects.dlq(channel), letter, `${id}:${channel}:dlq:${randomUUID()}`);
  return { item, seq };
}

const contact = (userId: string, email: string) =>
  database.sql`insert into user_contacts (user_id, email) values (${userId}, ${email})
    on conflict (user_id) do update set email = excluded.email`;
const statusOf = async (item: WorkItem) =>
  (
    await database.sql<{ status: string; reason: string | null }[]>`
      select status, reason from notification_channels
      where notification_id = ${item.notification_id} and channel = ${item.channel}`
  )[0];
const workCount = async () => (await bus.jsm.streams.info(bus.streams.work)).state.messages;
const deps = { database, bus, criticalCategories: ["security"] };

t.test("filters: a reason is a class exactly or part of the text; until ends the window", async (t) => {
  const letter: StoredLetter = {
    seq: 1,
    time: new Date(),
    letter: { class: "permanent", reason: "Plivo 400: bad Number", item: { notification_id: "n1" } } as DeadLetter,
  };
  t.ok(reasonMatches(letter.letter, "permanent"));
  t.ok(reasonMatches(letter.letter, "BAD number"), "case-insensitive part of the text");
  t.notOk(reasonMatches(letter.letter, "retries_exhausted"));
  t.ok(matchesFilters(letter, {}));
  t.ok(matchesFilters(letter, { notification: "n1", reason: "plivo" }));
  t.notOk(matchesFilters(letter, { notification: "n2" }));
  t.ok(matchesFilters(letter, { class: "permanent" }), "a class matches exactly");
  t.notOk(matchesFilters(letter, { class: "retries_exhausted" }));
  const mentioning = {
    ...letter,
    letter: { ...letter.letter, class: "retries_exhausted", reason: "permanent-looking" },
  };
  t.ok(matchesFilters(mentioning as StoredLetter, { reason: "permanent" }), "a reason filter matches the text");
  t.notOk(matchesFilters(mentioning as StoredLetter, { class: "permanent" }), "a class filter does not");
  t.notOk(matchesFilters(letter, { until: new Date(Date.now() - 60_000) }), "after the window");
  t.ok(matchesFilters(letter, { until: new Date(Date.now() + 60_000) }));
});

t.test("readDeadLetters: oldest first, by channel, reason and notification", async (t) => {
  const a = await deadLetter({ reason: "sendgrid 400: blocked" });
  const b = await deadLetter({ channel: "sms", cls: "retries_exhausted", reason: "retries exhausted: plivo 503" });
  const all = await readDeadLetters(bus, {});
  t.same(
    all.map((l) => l.seq),
    [...all.map((l) => l.seq)].sort((x, y) => x - y),
    "oldest first",
  );
  t.ok(all.some((l) => l.seq === a.seq) && all.some((l) => l.seq === b.seq));
  t.same(
    (await readDeadLetters(bus, { channel: "sms" })).map((l) => l.seq),
    [b.seq],
  );
  t.same(
    (await readDeadLetters(bus, { reason: "retries_exhausted" })).map((l) => l.seq),
    [b.seq],
  );
  t.same(
    (await readDeadLetters(bus, { notification: a.item.notification_id })).map((l) => l.seq),
    [a.seq],
  );
  t.same(await readDeadLetters(bus, { since: new Date(Date.now() + 60_000) }), [], "nothing after now");
  const states = await channelStates(database, all);
  t.equal(statusNow(states, all.find((l) => l.seq === b.seq) as StoredLetter), "failed");
  // As retention takes it: the notification and its channel rows.
  await database.sql`delete from notification_channels where notification_id = ${a.item.notification_id}`;
  await database.sql`delete from notifications where id = ${a.item.notification_id}`;
  const again = await channelStates(database, all);
  t.equal(statusNow(again, all.find((l) => l.seq === a.seq) as StoredLetter), "gone", "its notification is gone");
});

t.test("showDeadLetter: the letter, its channel now and its status history; unknown seq fails", async (t) => {
  const l = await deadLetter();
  await database.sql`insert into channel_status_events (notification_id, channel, status, reason, attempt)
    values (${l.item.notification_id}, 'email', 'failed', 'bounced', 1)`;
  const detail = await showDeadLetter({ bus, database }, l.seq);
  t.equal(detail.stored.letter.item.notification_id, l.item.notification_id);
  t.match(detail.state, { status: "failed", attempts: 1 });
  t.match(detail.history, [{ status: "failed", reason: "bounced", attempt: 1 }]);
  await t.rejects(showDeadLetter({ bus, database }, 999_999), /no dead letter with sequence 999999/);
});

t.test("a channel dead-lettered twice is replayed once, from its latest letter", async (t) => {
  const first = await deadLetter();
  const second = await deadLetter();
  const letters = await readDeadLetters(bus, {});
  const twice = [...letters, { ...(letters.find((l) => l.seq === first.seq) as StoredLetter), seq: 10_000_000 }];
  const latest = latestPerChannel(twice);
  t.equal(latest.length, letters.length);
  t.equal(latest.find((l) => l.letter.item.notification_id === first.item.notification_id)?.seq, 10_000_000);
  t.ok(latest.some((l) => l.seq === second.seq));
});

t.test("replayDeadLetters: a dry run plans and changes nothing; a run republishes", async (t) => {
  const l = await deadLetter();
  await contact(l.item.user_id, "new@example.com");
  const unreachable = await deadLetter();
  const before = await workCount();
  const dry = await replayDeadLetters(deps, {
    seqs: [l.seq, unreachable.seq],
    filters: {},
    includeUnsettled: false,
    dryRun: true,
  });
  t.match(dry, { selected: 2, replayed: 0, skipped: 1 });
  t.match(dry.results, [
    {
      seq: l.seq,
      result: "would replay to the user's new address",
      to: "new@example.com",
      previous_to: "old@example.com",
    },
    {
      seq: unreachable.seq,
      result: "skipped: unreachable: the user has no email address now",
      previous_to: "old@example.com",
    },
  ]);
  t.notOk("to" in (dry.results[1] as object), "a skipped letter goes nowhere");
  t.equal(await workCount(), before, "nothing published");
  t.match(await statusOf(l.item), { status: "failed" });

  const progress: string[] = [];
  const run = await replayDeadLetters(
    deps,
    { seqs: [l.seq], filters: {}, includeUnsettled: false, dryRun: false },
    (done, total) => progress.push(`${done}/${total}`),
  );
  t.match(run, { selected: 1, replayed: 1, skipped: 0 });
  t.same(progress, ["1/1"]);
  t.equal(await workCount(), before + 1);
  t.match(await statusOf(l.item), { status: "pending", reason: REPLAY_REASON });
  t.match((await guard.get(guardKey(l.item.notification_id, "email")))?.json<GuardValue>(), { state: "failed" });
});

t.test(
  "replay releases a dead guard, never a send in flight, and refuses once the provider accepted or the channel moved on",
  async (t) => {
    const l = await deadLetter();
    await contact(l.item.user_id, "x@example.com");
    const [state] = [
      ...(await channelStates(database, await readDeadLetters(bus, { notification: l.item.notification_id }))).values(),
    ];
    const context = { database, guard, criticalCategories: [], now: new Date() };
    const plan = await planReplay(
      context,
      (await showDeadLetter({ bus, database }, l.seq)).stored.letter,
      state,
      false,
    );
    t.equal(plan.action, "replay");
    if (plan.action !== "replay") return;

    // A send in flight (a live claim) is never released: replaying it could send twice. Neither
    // is a guard whose outcome is unknown, unless the operator accepts that risk.
    const key = guardKey(l.item.notification_id, "email");
    await guard.put(key, encode({ state: "sending", at: Date.now(), attempt: 2, worker: "w" }));
    for (const includeUnsettled of [false, true]) {
      t.equal(
        await replay({ database, bus, guard }, plan.item, includeUnsettled),
        "a send is in flight (send guard: sending); replay it once it has settled",
        `a live claim is kept (include unsettled: ${includeUnsettled})`,
      );
    }
    t.match((await guard.get(key))?.json<GuardValue>(), { state: "sending" }, "the claim is untouched");
    t.match(await statusOf(l.item), { status: "failed" }, "and the channel too");
    await guard.put(key, encode({ state: "unknown", at: Date.now(), attempt: 1, worker: "w" }));
    t.equal(
      await replay({ database, bus, guard }, plan.item, false),
      "the provider may have accepted it (send guard: unknown); include unsettled to resend anyway",
    );
    // Accepted: released so the next attempt may claim it.
    t.equal(await replay({ database, bus, guard }, plan.item, true), null);
    t.match((await guard.get(key))?.json<GuardValue>(), {
      state: "failed",
      reason: "released for a replay",
      worker: "w",
    });

    const sent = await deadLetter();
    await guard.put(
      guardKey(sent.item.notification_id, "email"),
      encode({ state: "sent", at: Date.now(), attempt: 1 }),
    );
    t.equal(
      await replay({ database, bus, guard }, { ...sent.item, to: "y@example.com" }, false),
      "the provider accepted it (send guard: sent)",
    );

    const moved = await deadLetter();
    await database.sql`update notification_channels set status = 'delivered' where notification_id = ${moved.item.notification_id}`;
    t.equal(await replay({ database, bus, guard }, moved.item, false), "the channel changed meanwhile");

    const unsettled = await deadLetter({ cls: "outcome_unknown" });
    t.equal(
      await replay({ database, bus, guard }, unsettled.item, false),
      "the channel changed meanwhile",
      "an unsettled channel is not reset without includeUnsettled",
    );
    t.equal(await replay({ database, bus, guard }, unsettled.item, true), null);
    t.equal(await replay({ database, bus, guard }, unsettled.item, true), null, "an interrupted replay resumes");
  },
);

t.test("a dead letter to a suppressed address is skipped, naming the entry, in a dry run and a run", async (t) => {
  const suppress = async (address: string, clientId: string, reason: string) => {
    const [row] = await database.sql<{ created_at: Date }[]>`
      insert into suppressions (channel, address, client_id, reason, source)
      values ('email', ${address}, ${clientId}, ${reason}, '{}') returning created_at`;
    return (row as { created_at: Date }).created_at.toISOString();
  };
  // For every client, matched on the address as the list keeps it (the contact's spelling aside).
  const everyone = await deadLetter();
  await contact(everyone.item.user_id, "Complained@Example.com");
  const since = await suppress("complained@example.com", "", "spam_complaint");
  // The client's own entry holds for its notifications; another client's does not.
  const own = await deadLetter({ client: "shop" });
  await contact(own.item.user_id, "asked@example.com");
  const ownSince = await suppress("asked@example.com", "shop", "manual");
  const other = await deadLetter({ client: "blog" });
  await contact(other.item.user_id, "shops-own@example.com");
  await suppress("shops-own@example.com", "shop", "manual");
  // Suppressed at the old address only: the replay goes to the corrected one.
  const moved = await deadLetter();
  await contact(moved.item.user_id, "fixed@example.com");
  await suppress("old@example.com", "", "hard_bounce");

  const seqs = [everyone.seq, own.seq, other.seq, moved.seq];
  const before = await workCount();
  for (const dryRun of [true, false]) {
    const run = await replayDeadLetters(deps, { seqs, filters: {}, includeUnsettled: false, dryRun });
    t.match(run, { selected: 4, replayed: dryRun ? 0 : 2, skipped: 2 }, `dry run: ${dryRun}`);
    t.match(run.results, [
      {
        seq: everyone.seq,
        result: `skipped: the address is on the suppression list (address_suppressed: spam_complaint, every client, since ${since})`,
      },
      {
        seq: own.seq,
        result: `skipped: the address is on the suppression list (address_suppressed: manual, this client, since ${ownSince})`,
      },
      { seq: other.seq, result: dryRun ? "would replay to the user's new address" : "replayed" },
      { seq: moved.seq, result: dryRun ? "would replay to the user's new address" : "replayed" },
    ]);
    t.notOk("to" in (run.results[0] as object), "a skipped letter goes nowhere");
  }
  t.equal(await workCount(), before + 2, "only the two whose addresses are not suppressed are published");
  t.match(await statusOf(everyone.item), { status: "failed" }, "a skipped channel is left as it was");
  t.match(await statusOf(own.item), { status: "failed" });
});

t.test("a dead letter past its deliver-by deadline is never replayed; one with time left is", async (t) => {
  const late = await deadLetter({ deliverBy: new Date(Date.now() - 60_000).toISOString() });
  const timely = await deadLetter({ deliverBy: new Date(Date.now() + 3_600_000).toISOString() });
  await contact(late.item.user_id, "late@example.com");
  await contact(timely.item.user_id, "timely@example.com");
  const before = await workCount();
  const run = await replayDeadLetters(deps, {
    seqs: [late.seq, timely.seq],
    filters: {},
    includeUnsettled: false,
    dryRun: false,
  });
  t.match(run, { selected: 2, replayed: 1, skipped: 1 });
  t.match(run.results, [
    { seq: late.seq, result: /^skipped: its deliver-by deadline \(.+\) has passed$/ },
    { seq: timely.seq, result: /^replayed/ },
  ]);
  t.equal(await workCount(), before + 1, "only the one with time left is published");
  t.match(await statusOf(late.item), { status: "failed" }, "the late one is left as it was");
});

t.test("named letters are read by sequence, never by reading the stream; filters still apply", async (t) => {
  const sms = await deadLetter({ channel: "sms" });
  const email = await deadLetter({ channel: "email" });
  // Every JetStream API request of this connection is a core NATS message a subscriber sees too.
  const reads: string[] = [];
  const watch = bus.nc.subscribe(`$JS.API.CONSUMER.CREATE.${bus.streams.dlq}.>`, {
    callback: (_error, msg) => {
      reads.push(msg.subject);
    },
  });
  t.teardown(() => watch.unsubscribe());
  const plan = (seqs: number[], filters = {}) =>
    replayDeadLetters(
      { database, bus, criticalCategories: [] },
      { seqs, filters, includeUnsettled: false, dryRun: true },
    );
  const both = await plan([email.seq, sms.seq, 999_999]);
  t.same(
    both.results.map((r) => r.seq),
    [sms.seq, email.seq],
    "oldest first; an unknown sequence is no letter",
  );
  t.match(both, { remaining: 0, nextSeq: null });
  t.same(
    (await plan([email.seq, sms.seq], { channel: "sms" })).results.map((r) => r.seq),
    [sms.seq],
  );
  t.same((await plan([email.seq], { since: new Date(Date.now() + 60_000) })).results, [], "since applies");
  await bus.nc.flush();
  t.same(reads, [], "no consumer made on the dead-letter stream");
  await plan([], { channel: "sms" });
  await bus.nc.flush();
  t.ok(reads.length > 0, "a selection by filters reads the stream (the watch sees it)");
});

t.test("a selection by filters stops at `until` and looks at `scanLimit` letters a call", async (t) => {
  const early = await deadLetter({ channel: "push" });
  await new Promise((resolve) => setTimeout(resolve, 5));
  const until = new Date();
  await new Promise((resolve) => setTimeout(resolve, 5));
  const later: number[] = [];
  for (let i = 0; i < 10; i++) later.push((await deadLetter({ channel: "push" })).seq);
  // Many more after it (copies: a read fetches up to 256 at a time, so the stop shows past that).
  const copy = (await readDeadLetters(bus, { channel: "push" })).at(-1)?.letter;
  for (let i = 0; i < 600; i++) {
    later.push((await bus.publish(bus.subjects.dlq("push"), copy, `copy-${i}-${randomUUID()}`)).seq);
  }
  const plan = (filters: object, more: object = {}) =>
    replayDeadLetters(
      { database, bus, criticalCategories: [] },
      { seqs: [], filters, includeUnsettled: false, dryRun: true, ...more },
    );

  const before = bus.nc.stats().inMsgs;
  const windowed = await plan({ channel: "push", until });
  t.ok(windowed.results.some((r) => r.seq === early.seq));
  t.notOk(
    windowed.results.some((r) => later.includes(r.seq)),
    "none after until",
  );
  t.match(windowed, { remaining: 0, nextSeq: null }, "the selection is complete");
  const read = bus.nc.stats().inMsgs - before;
  t.ok(read < 300, `the read stopped at the first letter past until (${read} messages received, 610 after it)`);

  // The first letter after `until` by its notification, looking at 7 messages a call: calls go
  // on from next_seq until the selection is complete, and it is found exactly once.
  const target = (await readDeadLetters(bus, { channel: "push" })).find((l) => l.seq === later[0]);
  const notification = target?.letter.item.notification_id;
  const found: number[] = [];
  let calls = 0;
  let fromSeq: number | undefined;
  do {
    const call = await plan({ channel: "push", notification }, { scanLimit: 7, ...(fromSeq ? { fromSeq } : {}) });
    calls++;
    found.push(...call.results.map((r) => r.seq));
    t.ok(call.nextSeq === null || call.remaining > 0, "next_seq comes with what is left");
    fromSeq = call.nextSeq ?? undefined;
  } while (fromSeq !== undefined && calls < 100);
  t.same(found, [target?.seq], "found once");
  t.ok(calls >= 80, `${calls} calls of at most 7 letters each`);
});
