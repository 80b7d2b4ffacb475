import { randomUUID } from "node:crypto";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import {
  checkCompletions,
  type DueDelivery,
  dispatchDue,
  endFallback,
  purgeWebhookHistory,
  takeFallbackStep,
} from "../../src/index.js";

// The webhook dispatcher's steps against the real PostgreSQL: completion checks that count a
// broadcast's recipients and write broadcast.completed once, and due deliveries handed out
// endpoint by endpoint. The triggers of the migrations write the events, as the stages' changes do.
const { database } = await freshDatabase(t);
const { sql } = database;
await sql`insert into audiences (id, name) values ('aud', 'everyone')`;

const endpoint = async (clientId: string, eventTypes: string[] | null) => {
  const id = `we_${randomUUID()}`;
  await sql`insert into webhook_endpoints (id, client_id, url, event_types, secret)
    values (${id}, ${clientId}, 'https://hooks.example.com/in', ${eventTypes}::text[], 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')`;
  return id;
};

const newBroadcast = async (clientId: string) => {
  const id = randomUUID();
  await sql`insert into broadcasts (id, client_id, dedup_key, request_hash, audience_id, category, template_id, data, status, total)
    values (${id}, ${clientId}, ${id}, 'h', 'aud', 'deals', 'promo', '{}', 'expanding', 0)`;
  return id;
};

/** Expands `count` recipients of a broadcast, as the expander's batch does; answers their ids. */
const expand = async (broadcastId: string, clientId: string, count: number) => {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = randomUUID();
    ids.push(id);
    await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
      values (${id}, ${clientId}, ${`u-${id}`}, 'deals', 'promo', 'promotional', '{}', ${id}, 'h', 0)`;
    await sql`insert into broadcast_recipients values (${broadcastId}, ${`u-${id}`}, ${id})`;
    await sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'email', 'pending')`;
  }
  await sql`update broadcasts set expanded = expanded + ${count} where id = ${broadcastId}`;
  return ids;
};

const end = (ids: string[], status: string) =>
  sql`update notification_channels set status = ${status} where notification_id = any(${ids}::text[])`;
const finish = (broadcastId: string, status = "expanded") =>
  sql`update broadcasts set status = ${status}, finished_at = now() where id = ${broadcastId}`;
const drain = async () => {
  while ((await checkCompletions(database, 500)) > 0) {}
};
const completedEvents = (broadcastId: string) =>
  sql<Array<{ id: string; data: Record<string, unknown> }>>`
    select id, data from webhook_events where type = 'broadcast.completed' and data->>'broadcast_id' = ${broadcastId}`;

t.test("broadcast.completed is written once every expanded recipient has ended, with the outcomes", async (t) => {
  const wanted = await endpoint("bc-client", ["broadcast.completed"]);
  const broadcast = await newBroadcast("bc-client");
  const first = await expand(broadcast, "bc-client", 3);
  await end(first, "delivered");
  await drain();
  t.same(await completedEvents(broadcast), [], "not while it is still expanding");

  const second = await expand(broadcast, "bc-client", 3);
  await finish(broadcast);
  await end(second.slice(0, 2), "failed");
  await drain();
  t.same(await completedEvents(broadcast), [], "not while a recipient is pending");

  await end(second.slice(2), "suppressed");
  await drain();
  await drain();
  const [event, ...more] = await completedEvents(broadcast);
  t.equal(more.length, 0, "once");
  t.match(event?.data, {
    broadcast_id: broadcast,
    client_id: "bc-client",
    category: "deals",
    status: "expanded",
    recipients: 6,
    outcomes: { completed: 3, partially_failed: 0, failed: 2, suppressed: 1 },
  });
  const deliveries = await sql`select endpoint_id from webhook_deliveries where event_id = ${event?.id ?? "0"}`;
  t.same(
    deliveries.map((d) => d.endpoint_id),
    [wanted],
    "owed to the endpoint that wants it",
  );
  const perRecipient =
    await sql`select count(*)::int as n from webhook_deliveries d join webhook_events e on e.id = d.event_id
    where e.type = 'notification.completed' and e.client_id = 'bc-client'`;
  t.equal(perRecipient[0]?.n, 0, "no endpoint is owed the recipients' own completions, which it did not ask for");
});

t.test("a broadcast whose recipients all ended before it finished expanding completes when it finishes", async (t) => {
  await endpoint("early-client", ["broadcast.completed"]);
  const broadcast = await newBroadcast("early-client");
  await end(await expand(broadcast, "early-client", 4), "delivered");
  await drain();
  t.same(await completedEvents(broadcast), []);
  await finish(broadcast);
  await drain();
  t.match((await completedEvents(broadcast))[0]?.data, { recipients: 4, outcomes: { completed: 4 } });
});

t.test("an empty broadcast and a cancelled one complete too", async (t) => {
  await endpoint("empty-client", ["broadcast.completed"]);
  const empty = await newBroadcast("empty-client");
  await finish(empty);
  await drain();
  t.match((await completedEvents(empty))[0]?.data, { recipients: 0, status: "expanded" });

  const cancelled = await newBroadcast("empty-client");
  const ids = await expand(cancelled, "empty-client", 2);
  await finish(cancelled, "cancelled");
  await end(ids, "delivered");
  await drain();
  t.match((await completedEvents(cancelled))[0]?.data, { recipients: 2, status: "cancelled" });
});

t.test("a recipient is counted once, whatever checks its channels ask for", async (t) => {
  await endpoint("twice-client", ["broadcast.completed"]);
  const broadcast = await newBroadcast("twice-client");
  const ids = await expand(broadcast, "twice-client", 2);
  for (const id of ids)
    await sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'sms', 'pending')`;
  await finish(broadcast);
  // Each channel ends in its own statement, and checks are taken between them and after.
  await sql`update notification_channels set status = 'delivered' where notification_id = ${ids[0] as string} and channel = 'email'`;
  await drain();
  await sql`update notification_channels set status = 'delivered' where notification_id = ${ids[0] as string} and channel = 'sms'`;
  await drain();
  await sql`update notification_channels set status = 'delivered' where notification_id = ${ids[1] as string}`;
  await sql`insert into webhook_completion_checks (notification_id) values (${ids[0] as string}) on conflict do nothing`;
  // Two dispatchers at once, as during a lease's hand-over.
  await Promise.all([drain(), drain()]);
  const events = await completedEvents(broadcast);
  t.equal(events.length, 1);
  t.match(events[0]?.data, { recipients: 2, outcomes: { completed: 2 } });
  const [tally] =
    await sql`select ended::int, completed_at from webhook_broadcast_tallies where broadcast_id = ${broadcast}`;
  t.equal(tally?.ended, 2, "counted once each");
  t.ok(tally?.completed_at);
});

t.test("a broadcast accepted while no endpoint wanted broadcast.completed is not tallied", async (t) => {
  const broadcast = await newBroadcast("late-client");
  await endpoint("late-client", ["broadcast.completed"]);
  await end(await expand(broadcast, "late-client", 1), "delivered");
  await finish(broadcast);
  await drain();
  t.same(await completedEvents(broadcast), []);
  t.same(await sql`select 1 from webhook_broadcast_tallies where broadcast_id = ${broadcast}`, []);
});

t.test("a notification whose fallback chain stops after its channel ended is completed then", async (t) => {
  await endpoint("chain-client", ["notification.completed"]);
  const id = randomUUID();
  await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, 'chain-client', 'u-chain', 'account', 'welcome', 'transactional', '{}', ${id}, 'h', 0)`;
  await sql`insert into notification_fallbacks (notification_id, steps, watching)
    values (${id}, ${sql.json([{ channel: "email", when: ["failed"] }] as never)}, 'push')`;
  await sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'push', 'pending')`;
  // Suppressed: the step (on failure only) may still be taken until the processor's chain stops.
  await end([id], "suppressed");
  await drain();
  const completed = () =>
    sql`select data from webhook_events where type = 'notification.completed' and notification_id = ${id}`;
  t.same(await completed(), [], "not while the chain may send another channel");
  await endFallback(database, id, "u-chain", 0);
  await drain();
  t.match(await completed(), [{ data: { status: "suppressed" } }], "completed once the chain stops");
});

t.test("a fallback step taken and a channel expired are events", async (t) => {
  await endpoint("step-client", ["fallback.taken", "channel.failed", "channel.expired"]);
  const id = randomUUID();
  await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, 'step-client', 'u-step', 'account', 'welcome', 'transactional', '{}', ${id}, 'h', 0)`;
  await sql`insert into notification_fallbacks (notification_id, steps, watching)
    values (${id}, ${sql.json([{ channel: "email", when: ["failed"] }] as never)}, 'push')`;
  await sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'push', 'pending')`;
  await end([id], "failed");
  const next = {
    channel: "email" as const,
    status: "expired" as const,
    reason: "deliver_by passed",
    nextAttemptAt: null,
  };
  t.ok(
    await takeFallbackStep(database, {
      notificationId: id,
      userId: "u-step",
      step: 0,
      from: "push",
      because: "failed",
      next,
    }),
  );
  const events = await sql<Array<{ type: string; data: Record<string, unknown> }>>`
    select type, data from webhook_events where notification_id = ${id} order by id`;
  t.match(events, [
    { type: "channel.failed", data: { channel: "push", status: "failed" } },
    { type: "fallback.taken", data: { from: "push", to: "email", because: "failed", step: 1 } },
    { type: "channel.expired", data: { channel: "email", status: "expired", reason: "deliver_by passed" } },
  ]);
  t.equal(events.length, 3);
});

t.test("an in-app item read and a broadcast expanded are events", async (t) => {
  await endpoint("read-client", ["inbox.read", "broadcast.expanded"]);
  const broadcast = await newBroadcast("read-client");
  const [id] = await expand(broadcast, "read-client", 1);
  await sql`insert into inbox_items (user_id, client_id, notification_id, category, body)
    values (${`u-${id}`}, 'read-client', ${id as string}, 'deals', 'hello')`;
  await sql`update inbox_items set read_at = now() where notification_id = ${id as string}`;
  await sql`update inbox_items set read_at = now() where notification_id = ${id as string}`;
  await finish(broadcast);
  const events = await sql<Array<{ type: string; data: Record<string, unknown> }>>`
    select type, data from webhook_events where client_id = 'read-client' order by id`;
  t.match(events, [
    { type: "inbox.read", data: { notification_id: id, channel: "in_app", user_id: `u-${id}` } },
    { type: "broadcast.expanded", data: { broadcast_id: broadcast, expanded: 1 } },
  ]);
  t.equal(events.length, 2, "read once, expanded once");
});

/** Endpoints whose events are owed at once: `backlog` each, all due. */
const backlogs = async (clientId: string, count: number, backlog: number) => {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = await endpoint(clientId, ["ping"]);
    ids.push(id);
    await sql`with e as (
        insert into webhook_events (client_id, type, data) select ${clientId}, 'ping', '{}' from generate_series(1, ${backlog})
        returning id)
      insert into webhook_deliveries (endpoint_id, event_id, next_attempt_at)
      select ${id}, id, now() - make_interval(secs => ${(count - i) * 3600} + id::int % 100) from e`;
  }
  return ids;
};

t.test("endpoints are served in turn: a backlog never delays another endpoint's first post", async (t) => {
  await sql`delete from webhook_deliveries`;
  // Seven endpoints with older backlogs than the eighth's single post.
  const [...busy] = await backlogs("turns-client", 7, 200);
  const [quiet] = await backlogs("turns-client", 1, 1);
  const batches: DueDelivery[][] = [];
  const publish = async (deliveries: DueDelivery[]) => {
    batches.push(deliveries);
  };
  const round = await dispatchDue(database, 40, publish, 10_000);
  t.equal(round.published, 40);
  const first = batches[0] ?? [];
  t.ok(
    first.some((d) => d.endpoint_id === quiet),
    "the quiet endpoint's post is in the first batch",
  );
  // Forty places: the quiet one's post, then the seven busy ones in turn (five or six each).
  for (const id of busy) {
    const taken = first.filter((d) => d.endpoint_id === id).length;
    t.ok(taken === 5 || taken === 6, `a busy endpoint has its turns (${taken})`);
  }
  while ((await dispatchDue(database, 500, publish, 10_000)).published > 0) {}
  t.equal(batches.flat().length, 7 * 200 + 1, "and every backlog, batch after batch");
});

t.test("an endpoint has at most its limit in flight; an answer makes room for the next", async (t) => {
  await sql`delete from webhook_deliveries`;
  const [hook] = await backlogs("flight-client", 1, 100);
  const published: DueDelivery[] = [];
  const publish = async (deliveries: DueDelivery[]) => {
    published.push(...deliveries);
  };
  t.same(await dispatchDue(database, 500, publish, 8), { published: 8, held: true });
  t.same(await dispatchDue(database, 500, publish, 8), { published: 0, held: true }, "none while eight are unanswered");
  const answered = published.slice(0, 3);
  await sql`update webhook_deliveries set status = 'delivered'
    where endpoint_id = ${hook as string} and event_id = any(${answered.map((d) => d.event_id)}::bigint[])`;
  t.same(await dispatchDue(database, 500, publish, 8), { published: 3, held: true }, "three answered, three more");
  await sql`update webhook_deliveries set next_attempt_at = now() - interval '1 second'
    where endpoint_id = ${hook as string} and status = 'queued'`;
  t.equal(
    (await dispatchDue(database, 500, publish, 8)).published,
    8,
    "an attempt unanswered past its time no longer counts, and is due again",
  );
  t.equal(new Set(published.map((d) => d.message_id)).size, published.length, "every publish a new message");
});

t.test("retention forgets old events and tallies, never an event still owed", async (t) => {
  const hook = await endpoint("old-client", null);
  const broadcast = await newBroadcast("old-client");
  await sql`update broadcasts set created_at = now() - interval '40 days' where id = ${broadcast}`;
  const events = await sql<Array<{ id: string }>>`
    insert into webhook_events (client_id, type, data, occurred_at)
    select 'old-client', 'channel.failed', '{}', now() - interval '40 days' from generate_series(1, 3) returning id`;
  const [delivered, owed, recent] = events.map((e) => e.id);
  await sql`update webhook_events set occurred_at = now() where id = ${recent as string}`;
  await sql`delete from webhook_deliveries where endpoint_id = ${hook}`;
  await sql`insert into webhook_deliveries (endpoint_id, event_id, status, next_attempt_at) values
    (${hook}, ${delivered as string}, 'delivered', null), (${hook}, ${owed as string}, 'waiting', now())`;
  await sql`insert into webhook_attempts (endpoint_id, event_id, attempt, latency_ms, at)
    values (${hook}, ${delivered as string}, 1, 5, now() - interval '40 days')`;
  t.equal((await sql`select 1 from webhook_broadcast_tallies where broadcast_id = ${broadcast}`).length, 1);
  t.equal(await purgeWebhookHistory(database, 30), 1, "the delivered old event");
  const left =
    await sql`select id::text from webhook_events where id = any(${events.map((e) => e.id)}::bigint[]) order by id`;
  t.same(
    left.map((e) => e.id),
    [owed, recent],
    "the owed one and the recent one stay",
  );
  t.same(await sql`select 1 from webhook_attempts where endpoint_id = ${hook}`, []);
  t.same(await sql`select 1 from webhook_broadcast_tallies where broadcast_id = ${broadcast}`, []);
});

t.test("a recipient canceled by its client ends like any outcome, and is counted as canceled", async (t) => {
  await endpoint("cancel-client", ["broadcast.completed", "channel.canceled"]);
  const broadcast = await newBroadcast("cancel-client");
  const [sent, ...canceled] = await expand(broadcast, "cancel-client", 3);
  await finish(broadcast);
  await end([sent as string], "delivered");
  await end(canceled, "canceled");
  await drain();
  const [event] = await completedEvents(broadcast);
  t.match(event?.data, {
    recipients: 3,
    outcomes: { completed: 1, partially_failed: 0, failed: 0, suppressed: 0, canceled: 2 },
  });
  const recipients = await sql<Array<{ data: { status: string } }>>`
    select data from webhook_events where type = 'notification.completed' and notification_id = any(${canceled}::text[])`;
  t.same(
    recipients.map((r) => r.data.status),
    ["canceled", "canceled"],
    "each canceled recipient's own completion says canceled",
  );
  const events = await sql`
    select 1 from webhook_events where type = 'channel.canceled' and notification_id = any(${canceled}::text[])`;
  t.equal(events.length, 2, "and each cancel is a channel.canceled event");
});

t.test("a channel ending while the dispatcher takes another channel's check still completes it", async (t) => {
  await endpoint("race-client", ["notification.completed"]);
  const id = randomUUID();
  await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, 'race-client', 'u-race', 'account', 'welcome', 'transactional', '{}', ${id}, 'h', 0)`;
  await sql`insert into notification_channels (notification_id, channel, status)
    values (${id}, 'email', 'pending'), (${id}, 'in_app', 'pending')`;
  // The first channel's outcome is committed with its check.
  await sql`update notification_channels set status = 'delivered' where notification_id = ${id} and channel = 'email'`;
  let commit = () => {};
  const held = new Promise<void>((resolve) => {
    commit = resolve;
  });
  let updated = () => {};
  const changed = new Promise<void>((resolve) => {
    updated = resolve;
  });
  // The second's is written, not committed, while a dispatcher round runs.
  const second = sql.begin(async (tx) => {
    await tx`update notification_channels set status = 'delivered' where notification_id = ${id} and channel = 'in_app'`;
    updated();
    await held;
  });
  await changed;
  await checkCompletions(database, 100);
  commit();
  await second;
  await drain();
  const completed = await sql`
    select data from webhook_events where type = 'notification.completed' and notification_id = ${id}`;
  t.match(completed, [{ data: { status: "completed" } }], "written once both outcomes are committed");
});
