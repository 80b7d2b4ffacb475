import { randomUUID } from "node:crypto";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import {
  claimDelivery,
  type DueDelivery,
  dispatchDue,
  listWebhookAttempts,
  readEndpointFigures,
  recordWebhookAttempt,
  replayWebhookEvents,
} from "../../src/index.js";

// A delivery's runs against the real PostgreSQL: a replay starts a new run of attempts, numbered
// from 1 again; its attempts are recorded beside the earlier run's, and a message of an earlier
// run claims none of them.
const { database } = await freshDatabase(t);
const { sql } = database;

const endpoint = async (clientId: string) => {
  const id = `we_${randomUUID()}`;
  await sql`insert into webhook_endpoints (id, client_id, url, event_types, secret)
    values (${id}, ${clientId}, 'https://hooks.example.com/in', '{channel.delivered}'::text[], 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')`;
  return id;
};

/** A notification whose email channel was delivered; answers its channel.delivered event's id. */
const deliveredEvent = async (clientId: string): Promise<number> => {
  const id = randomUUID();
  await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, ${clientId}, 'user-1', 'account', 'welcome', 'transactional', '{}', ${id}, 'h', 0)`;
  await sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'email', 'pending')`;
  await sql`update notification_channels set status = 'delivered' where notification_id = ${id}`;
  const [event] = await sql`select id from webhook_events where notification_id = ${id} and type = 'channel.delivered'`;
  return Number(event?.id);
};

/** What the dispatcher publishes for this endpoint now. */
const dispatch = async (endpointId: string): Promise<DueDelivery[]> => {
  const published: DueDelivery[] = [];
  await dispatchDue(database, 500, async (deliveries) => {
    published.push(...deliveries);
  });
  return published.filter((d) => d.endpoint_id === endpointId);
};

/** A sender's work on one published attempt: claim it, and record a 2xx. */
const post = async (due: DueDelivery, redelivered = false) => {
  const delivery = { endpointId: due.endpoint_id, eventId: due.event_id, run: due.run, attempt: due.attempt };
  const claimed = await claimDelivery(database, { ...delivery, redelivered });
  if (claimed === undefined || claimed === "disabled") return claimed;
  await recordWebhookAttempt(database, {
    ...delivery,
    statusCode: 204,
    latencyMs: 12,
    error: null,
    next: { kind: "delivered" },
    disableFailingSince: new Date(0),
  });
  return claimed;
};

t.test("a replay after a delivery is a new run whose attempt is recorded beside the first", async (t) => {
  const hook = await endpoint("runs-client");
  const eventId = await deliveredEvent("runs-client");
  const [first, ...others] = await dispatch(hook);
  t.equal(others.length, 0);
  t.match(first, { event_id: eventId, run: 0, attempt: 1 });
  t.ok(await post(first as DueDelivery), "the first run's attempt is posted");

  t.equal(await replayWebhookEvents(database, "runs-client", hook, { eventIds: [eventId] }), 1);
  const [again] = await dispatch(hook);
  t.match(again, { event_id: eventId, run: 1, attempt: 1 }, "the replay's first attempt, of run 1");
  t.not(again?.message_id, first?.message_id, "published under a message id of its own");
  t.ok(await post(again as DueDelivery), "the replay's attempt is posted");

  const [delivery] = await sql`select status, run, attempts from webhook_deliveries where endpoint_id = ${hook}`;
  t.match(delivery, { status: "delivered", run: 1, attempts: 1 });
  const listed = await listWebhookAttempts(database, "runs-client", hook, 10);
  t.same(
    listed?.map((a) => [a.event_id, a.run, a.attempt, a.status_code]),
    [
      [`evt_${eventId}`, 1, 1, 204],
      [`evt_${eventId}`, 0, 1, 204],
    ],
    "both posts are listed, the replay's first",
  );
  const figures = (await readEndpointFigures(database, "runs-client", [hook])).get(hook);
  t.match(figures?.last_hour, { attempts: 2, succeeded: 2 }, "and counted in the last hour's figures");
});

t.test("a message of an earlier run claims nothing of a replay's", async (t) => {
  const hook = await endpoint("stale-client");
  const eventId = await deliveredEvent("stale-client");
  const [first] = await dispatch(hook);
  t.match(first, { run: 0, attempt: 1 });
  // The first run's attempt is published and claimed, then its sender is cut off mid-post; the
  // event is replayed meanwhile.
  t.ok(await claimDelivery(database, { endpointId: hook, eventId, run: 0, attempt: 1 }));
  t.equal(await replayWebhookEvents(database, "stale-client", hook, { eventIds: [eventId] }), 1);
  t.equal(await post(first as DueDelivery, true), undefined, "the first run's message, redelivered, claims nothing");
  const [again] = await dispatch(hook);
  t.match(again, { run: 1, attempt: 1 });
  t.ok(await post(again as DueDelivery), "the replay's own message claims its attempt");
  const listed = await listWebhookAttempts(database, "stale-client", hook, 10);
  t.same(
    listed?.map((a) => [a.run, a.attempt]),
    [[1, 1]],
  );
});
