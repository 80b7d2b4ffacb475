import { randomUUID } from "node:crypto";
import { CHANNEL_STATUSES, type ChannelStatus, canTransition } from "@notify/core";
import { freshDatabase } from "@notify/testing";
import fc from "fast-check";
import postgres from "postgres";
import t from "tap";
import { moveStatus } from "../../src/delivery/status.js";
import { applyPendingReceipts, type Receipt, recordReceipts } from "../../src/index.js";

const { url, database } = await freshDatabase(t);
const { sql } = database;

/** Notifications with these ids (one recipient, promotional): what channel rows hang off. */
const addNotifications = (ids: string[]) =>
  sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    select id, 'c', 'u', 'promo', 'welcome', 'promotional', '{}', id, 'h', 0 from unnest(${ids}::text[]) id`;

/** The statuses a notification's channels took, in order. */
const historyOf = async (id: string) =>
  (
    await sql<{ status: string }[]>`select status from channel_status_events where notification_id = ${id} order by id`
  ).map((h) => h.status);

// A batch of receipts recorded set-based must leave exactly what applying them one by one, in
// order, leaves: the same channel statuses and reasons, the same history per channel, the same
// counts of stored, duplicate and pending events.

interface EventSetup {
  /** Which channel's provider id it names (indexes past the channels name no send). */
  message: number;
  status: ChannelStatus | null;
  /** Carries the notification id and channel, as SendGrid's custom_args do. */
  withRef: boolean;
  /** From a small pool, so that duplicates (within the batch and with earlier posts) occur. */
  eventId: number;
}

// Each channel: its status, and whether its send is recorded under provider id `m<index>` (or
// not: a worker died after the send).
const channelArb = fc.record({ status: fc.constantFrom(...CHANNEL_STATUSES), recorded: fc.boolean() });
const eventArb = (channels: number) =>
  fc.record({
    message: fc.nat(channels),
    status: fc.option(fc.constantFrom<ChannelStatus>("delivered", "bounced", "failed", "unsettled"), { nil: null }),
    withRef: fc.boolean(),
    eventId: fc.nat(12),
  });
const scenarioArb = fc.array(channelArb, { minLength: 1, maxLength: 4 }).chain((channels) =>
  fc.record({
    channels: fc.constant(channels),
    earlier: fc.array(eventArb(channels.length), { maxLength: 4 }),
    batch: fc.array(eventArb(channels.length), { minLength: 1, maxLength: 14 }),
  }),
);

interface ModelChannel {
  providerId: string | null;
  status: ChannelStatus;
  reason: string | null;
  history: ChannelStatus[];
}

/** The one-by-one semantics: dedup by event id, apply when the send is known, bind by payload. */
function model(channels: ModelChannel[], seen: Set<string>, batch: Receipt[]) {
  const outcome = { stored: 0, duplicates: 0, pending: 0 };
  for (const r of batch) {
    if (seen.has(r.eventId)) {
      outcome.duplicates += 1;
      continue;
    }
    seen.add(r.eventId);
    outcome.stored += 1;
    let channel = channels.find((c) => c.providerId === r.providerId);
    const ref = r.payload as { notification_index?: number };
    if (channel === undefined && ref.notification_index !== undefined) {
      const target = channels[ref.notification_index];
      if (target && target.providerId === null) {
        target.providerId = r.providerId;
        channel = target;
      }
    }
    if (channel === undefined) {
      outcome.pending += 1;
      continue;
    }
    if (r.status !== null && canTransition(channel.status, r.status)) {
      channel.status = r.status;
      channel.reason = r.reason;
      channel.history.push(r.status);
    }
  }
  return outcome;
}

t.test("a batch recorded at once leaves what applying it receipt by receipt leaves", async (t) => {
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(scenarioArb, async ({ channels, earlier, batch }) => {
      runs += 1;
      const run = randomUUID();
      const ids = channels.map(() => randomUUID());
      for (const [i, c] of channels.entries()) {
        await addNotifications([ids[i] as string]);
        await sql`insert into notification_channels (notification_id, channel, status, provider, provider_id)
          values (${ids[i] as string}, 'email', ${c.status}, ${c.recorded ? "sendgrid" : null}, ${c.recorded ? `${run}-m${i}` : null})`;
      }
      // An event id names one event, whose payload names one notification or none: a provider's
      // retry repeats both (the receipt's key is the two together, drizzle/0031).
      const named = (e: EventSetup) => e.withRef && e.message < channels.length;
      const receipt = (e: EventSetup, n: number): Receipt => ({
        provider: "sendgrid",
        eventId: `${run}-e${e.eventId}${named(e) ? `-n${e.message}` : ""}`,
        providerId: `${run}-m${e.message}`,
        status: e.status,
        reason: `${e.status ?? "none"} #${n}`,
        payload: named(e) ? { notification_id: ids[e.message], channel: "email", notification_index: e.message } : {},
      });
      const modelChannels: ModelChannel[] = channels.map((c, i) => ({
        providerId: c.recorded ? `${run}-m${i}` : null,
        status: c.status,
        reason: null,
        history: [],
      }));
      const seen = new Set<string>();
      const earlierReceipts = earlier.map((e, n) => receipt(e, n));
      const batchReceipts = batch.map((e, n) => receipt(e, 100 + n));
      const expectedEarlier = model(modelChannels, seen, earlierReceipts);
      const expected = model(modelChannels, seen, batchReceipts);
      // Earlier posts one receipt each, as Plivo sends them; then the batch in one call.
      const gotEarlier = { stored: 0, duplicates: 0, pending: 0 };
      for (const r of earlierReceipts) {
        const o = await recordReceipts(sql, [r]);
        gotEarlier.stored += o.stored;
        gotEarlier.duplicates += o.duplicates;
        gotEarlier.pending += o.pending;
      }
      t.same(gotEarlier, expectedEarlier);
      t.same(await recordReceipts(sql, batchReceipts), expected, "the batch's counts");
      for (const [i, id] of ids.entries()) {
        const [row] = await sql<{ status: string; reason: string | null; provider_id: string | null }[]>`
          select status, reason, provider_id from notification_channels where notification_id = ${id}`;
        const history = await historyOf(id);
        const want = modelChannels[i] as ModelChannel;
        t.same(
          {
            status: row?.status,
            reason: row?.reason ?? null,
            providerId: row?.provider_id,
            history,
          },
          { status: want.status, reason: want.reason, providerId: want.providerId, history: want.history },
          `channel ${i}`,
        );
      }
    }),
    { numRuns: Number(process.env.FUZZ_RUNS ?? 60) },
  );
  t.ok(runs > 0);
});

t.test("a batch whose sends are all recorded costs a statement per round, not per receipt", async (t) => {
  const id = randomUUID();
  await addNotifications([id]);
  await sql`insert into notification_channels (notification_id, channel, status, provider, provider_id)
    values (${id}, 'email', 'pending', 'sendgrid', ${`m-${id}`})`;
  const batch: Receipt[] = Array.from({ length: 500 }, (_, n) => ({
    provider: "sendgrid",
    eventId: `e-${id}-${n}`,
    providerId: `m-${id}`,
    status: null,
    reason: null,
    payload: { notification_id: id, channel: "email" },
  }));
  batch.splice(100, 0, { ...(batch[0] as Receipt), eventId: `e-${id}-delivered`, status: "delivered" });
  batch.push({ ...(batch[0] as Receipt), eventId: `e-${id}-bounce`, status: "bounced", reason: "bounce" });
  // The statements one call sends, counted on a connection of its own.
  const statements: string[] = [];
  const counted = postgres(url, { max: 1, onnotice: () => {}, debug: (_c, query) => statements.push(query) });
  t.teardown(() => counted.end());
  await counted`select 1`;
  statements.length = 0;
  t.same(await recordReceipts(counted, batch), { stored: 502, duplicates: 0, pending: 0 });
  t.equal(statements.length, 2, "two statements for 502 receipts, a delivery and its bounce among them");
  t.same(await historyOf(id), ["delivered", "bounced"], "the delivery, then the bounce");
  const applied =
    await sql`select 1 from provider_receipts where provider_id = ${`m-${id}`} and applied_at is not null`;
  t.equal(applied.length, 502, "all applied");
});

t.test("two posts holding the same events in opposite orders are both stored, without a deadlock", async (t) => {
  for (let round = 0; round < 5; round++) {
    const ids = Array.from({ length: 100 }, () => randomUUID());
    await addNotifications(ids);
    await sql`insert into notification_channels (notification_id, channel, status, provider, provider_id)
      select id, 'email', 'pending', 'sendgrid', 'm-' || id from unnest(${ids}::text[]) id`;
    const batch: Receipt[] = ids.map((id) => ({
      provider: "sendgrid",
      eventId: `d-${id}`,
      providerId: `m-${id}`,
      status: "delivered",
      reason: null,
      payload: {},
    }));
    const [a, b] = await Promise.all([recordReceipts(sql, batch), recordReceipts(sql, [...batch].reverse())]);
    t.equal((a?.stored ?? 0) + (b?.stored ?? 0), 100, `round ${round}: each event stored once`);
  }
});

t.test("receipts that arrive before their sends are recorded are bound and applied set-based", async (t) => {
  const ids = Array.from({ length: 100 }, () => randomUUID());
  const setUp = async () => {
    await addNotifications(ids);
    // Sent, but not recorded yet: no provider id on the channel.
    await sql`insert into notification_channels (notification_id, channel, status)
      select id, 'sms', 'pending' from unnest(${ids}::text[]) id`;
  };
  await setUp();
  const receipts = (prefix: string): Receipt[] =>
    ids.map((id) => ({
      provider: "plivo",
      eventId: `${prefix}-${id}`,
      providerId: `p-${id}`,
      status: "delivered",
      reason: null,
      payload: { notification_id: id, channel: "sms" },
    }));
  const statements: string[] = [];
  const counted = postgres(url, { max: 1, onnotice: () => {}, debug: (_c, query) => statements.push(query) });
  t.teardown(() => counted.end());
  await counted`select 1`;
  statements.length = 0;
  t.same(await recordReceipts(counted, receipts("d")), { stored: 100, duplicates: 0, pending: 0 });
  t.equal(statements.length, 3, "store, bind, apply: three statements for 100 receipts, not a transaction each");
  const rows = await sql<{ status: string; provider_id: string; notification_id: string }[]>`
    select status, provider_id, notification_id from notification_channels where notification_id = any(${ids})`;
  t.equal(rows.length, 100);
  t.ok(
    rows.every((r) => r.status === "delivered" && r.provider_id === `p-${r.notification_id}`),
    "each channel bound to its own send and delivered",
  );
  const events = await sql`select 1 from channel_status_events where notification_id = any(${ids})`;
  t.equal(events.length, 100, "one history row each");

  // The same, left for the sweep: its transaction binds and applies them all in as few statements.
  await sql`delete from notification_channels where notification_id = any(${ids})`;
  await sql`delete from channel_status_events where notification_id = any(${ids})`;
  await sql`delete from notifications where id = any(${ids})`;
  // Only these pending (the tests above leave some of their own).
  await sql`delete from provider_receipts where applied_at is null`;
  await setUp();
  await sql`insert into provider_receipts (provider, event_id, provider_id, status, payload)
    select 'plivo', 's-' || id, 'p-' || id, 'delivered', jsonb_build_object('notification_id', id, 'channel', 'sms')
    from unnest(${ids}::text[]) id`;
  statements.length = 0;
  t.equal(await applyPendingReceipts(counted), 100, "all applied");
  t.ok(statements.length <= 6, `begin, select, lock, bind, apply, commit (${statements.length} statements)`);
  const swept =
    await sql`select 1 from notification_channels where notification_id = any(${ids}) and status = 'delivered'`;
  t.equal(swept.length, 100);
  t.equal(await applyPendingReceipts(sql), 0, "nothing left");
});

t.test("a post of one receipt looks its channel up by index, never scans every channel", async (t) => {
  // Enough channels that hashing the table once looked cheaper to the planner than a hundred
  // index lookups (it takes any batch for a hundred rows).
  const ids = Array.from({ length: 8000 }, () => randomUUID());
  await addNotifications(ids);
  await sql`insert into notification_channels (notification_id, channel, status, provider, provider_id)
    select id, 'sms', 'pending', 'plivo', 'p-' || id from unnest(${ids}::text[]) id`;
  await sql`analyze notification_channels`;
  const scans = (tx: postgres.TransactionSql) =>
    tx<{ seq_scan: number }[]>`
      select seq_scan::int from pg_stat_xact_user_tables where relname = 'notification_channels'`;
  const id = ids[17] as string;
  // A send not recorded yet: its receipt binds the channel its payload names.
  const unrecorded = randomUUID();
  await addNotifications([unrecorded]);
  await sql`insert into notification_channels (notification_id, channel, status) values (${unrecorded}, 'sms', 'pending')`;
  const one = (n: number, status: ChannelStatus | null, providerId = `p-${id}`, payload: unknown = {}): Receipt => ({
    provider: "plivo",
    eventId: `one-${n}-${id}`,
    providerId,
    status,
    reason: null,
    payload,
  });
  await sql.begin(async (tx) => {
    const before = (await scans(tx))[0]?.seq_scan ?? 0;
    const db = tx as unknown as typeof sql;
    t.same(await recordReceipts(db, [one(1, "delivered")]), { stored: 1, duplicates: 0, pending: 0 });
    // A second round: a bounce, then a later status of the same message, in one post.
    t.same(await recordReceipts(db, [one(2, null), one(4, "bounced"), one(5, "unsettled")]), {
      stored: 3,
      duplicates: 0,
      pending: 0,
    });
    // Bound by its payload.
    t.same(
      await recordReceipts(db, [
        one(3, "delivered", `u-${unrecorded}`, { notification_id: unrecorded, channel: "sms" }),
      ]),
      { stored: 1, duplicates: 0, pending: 0 },
    );
    // Naming no channel there is: pending.
    t.same(await recordReceipts(db, [one(6, null, `x-${id}`, { notification_id: randomUUID(), channel: "sms" })]), {
      stored: 1,
      duplicates: 0,
      pending: 1,
    });
    t.equal((await scans(tx))[0]?.seq_scan ?? 0, before, "no sequential scan of notification_channels");
  });
  const [bound] = await sql<{ status: string; provider_id: string }[]>`
    select status, provider_id from notification_channels where notification_id = ${unrecorded}`;
  t.same(bound, { status: "delivered", provider_id: `u-${unrecorded}` }, "bound by its payload and applied");
  const [row] = await sql<{ status: string }[]>`select status from notification_channels where notification_id = ${id}`;
  t.equal(row?.status, "bounced");
});

t.test(
  "the sweep binds by payload, keeps each message's order, and leaves a channel to the first message",
  async (t) => {
    await sql`delete from provider_receipts where applied_at is null`;
    const x = randomUUID();
    await addNotifications([x]);
    await sql`insert into notification_channels (notification_id, channel, status) values (${x}, 'email', 'pending')`;
    const ref = { notification_id: x, channel: "email" };
    // Stored unapplied, as a post leaves receipts whose send is not recorded: message A's receipts,
    // then message B's, which names the same channel.
    const stored = [
      { event: `a1-${x}`, message: `a-${x}`, status: "delivered", payload: ref },
      { event: `a2-${x}`, message: `a-${x}`, status: "bounced", payload: {} },
      { event: `b1-${x}`, message: `b-${x}`, status: "delivered", payload: ref },
    ];
    for (const [n, r] of stored.entries()) {
      await sql`insert into provider_receipts (provider, event_id, provider_id, status, payload, received_at)
      values ('sendgrid', ${r.event}, ${r.message}, ${r.status}, ${sql.json(r.payload)}, now() - ${`${10 - n} seconds`}::interval)`;
    }
    t.equal(await applyPendingReceipts(sql), 1, "A's first receipt binds the channel; B's cannot have it too");
    t.equal(await applyPendingReceipts(sql), 1, "A's bounce, now that its send is known");
    t.equal(await applyPendingReceipts(sql), 0, "B's receipt names a channel bound to another send");
    const [row] = await sql<{ status: string; provider_id: string }[]>`
    select status, provider_id from notification_channels where notification_id = ${x}`;
    t.same(row, { status: "bounced", provider_id: `a-${x}` });
    t.same(await historyOf(x), ["delivered", "bounced"], "in the order they came");
    const [left] = await sql<{ applied: boolean }[]>`
    select applied_at is not null as applied from provider_receipts where event_id = ${`b1-${x}`}`;
    t.equal(left?.applied, false, "B's receipt stays pending");
  },
);

t.test("a receipt is stored once, kept until its send is recorded, then applied", async (t) => {
  // What the tests above left pending is not this test's to apply.
  await sql`delete from provider_receipts where applied_at is null`;
  const id = randomUUID();
  await addNotifications([id]);
  await sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'email', 'pending')`;
  const receipt = {
    provider: "sendgrid",
    eventId: `e-${id}`,
    providerId: `m-${id}`,
    status: "bounced" as const,
    reason: "bounce",
    payload: {},
  };
  t.same(await recordReceipts(sql, [receipt]), { stored: 1, duplicates: 0, pending: 1 });
  t.same(
    await recordReceipts(sql, [receipt]),
    { stored: 0, duplicates: 1, pending: 0 },
    "a retried post is a duplicate",
  );
  t.equal(await applyPendingReceipts(sql), 0, "not applicable before the send is recorded");
  await moveStatus(sql, { notification_id: id, channel: "email" }, "delivered", {
    provider: "sendgrid",
    providerId: `m-${id}`,
  });
  t.equal(await applyPendingReceipts(sql), 1);
  const [row] = await sql<{ status: string; reason: string | null }[]>`
    select status, reason from notification_channels where notification_id = ${id} and channel = 'email'`;
  t.same(row, { status: "bounced", reason: "bounce" });
  t.equal(await applyPendingReceipts(sql), 0, "applied once");
});
