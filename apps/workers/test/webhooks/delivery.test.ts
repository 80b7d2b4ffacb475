import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import {
  checkCompletions,
  createEndpoint,
  type Database,
  dispatchDue,
  listWebhookAttempts,
  readEndpointFigures,
  replayWebhookEvents,
  rotateEndpointSecret,
} from "@notify/db";
import { startWebhookReceiver } from "@notify/devstack";
import { createMetrics } from "@notify/http";
import { captureLogger, eventually, freshBus, freshDatabase } from "@notify/testing";
import { Webhook } from "standardwebhooks";
import t from "tap";
import { createWebhookMetrics, type SenderOptions, startWebhookSender } from "../../src/webhooks/sender.js";

// The senders against the development stack's receiver, on a real Postgres and NATS: events are
// written by the database's triggers when a channel changes (here by SQL, as the stages do), the
// dispatcher's step (dispatchDue) publishes each due attempt, and a sender posts it.
const { database } = await freshDatabase(t);
const bus = await freshBus(t);
const receiver = await startWebhookReceiver();
t.teardown(() => receiver.close());
const log = captureLogger("workers");

const startSender = async (t: Tap, options: Partial<SenderOptions> = {}) => {
  const sender = await startWebhookSender(
    { bus, database, log: log.log, metrics: createWebhookMetrics(createMetrics("workers")) },
    {
      concurrency: 32,
      perEndpoint: 4,
      timeoutMs: 3000,
      schedule: [0.05, 0.05],
      disableAfterMs: 3_600_000,
      allowPrivateNetworks: true,
      ...options,
    },
  );
  t.teardown(() => sender.stop());
  return sender;
};
type Tap = { teardown(fn: () => unknown): void };

/** The dispatcher's loop, as the processor runs it, until stopped. */
const dispatching = (t: Tap) => {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      await checkCompletions(database, 500);
      await dispatchDue(database, 500, (deliveries) =>
        Promise.all(
          deliveries.map((d) =>
            bus.publish(
              bus.subjects.webhooks,
              { endpoint_id: d.endpoint_id, event_id: d.event_id, run: d.run, attempt: d.attempt },
              d.message_id,
            ),
          ),
        ).then(() => undefined),
      );
      await sleep(20);
    }
  })();
  t.teardown(async () => {
    stopped = true;
    await loop;
  });
};

const endpoint = async (clientId: string, name: string, eventTypes: string[] | null = null, include: string[] = []) => {
  const created = await createEndpoint(
    database,
    clientId,
    { url: `${receiver.url}/hooks/${name}`, eventTypes, include, description: null },
    20,
  );
  if (created === "limit_reached") throw new Error("no more endpoints for this client");
  receiver.setSecrets(name, [created.secret]);
  return created;
};

/** A notification of `clientId` with an email channel moved to `status` (as a worker would). */
const notification = async (db: Database, clientId: string, status = "delivered") => {
  const id = randomUUID();
  await db.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, ${clientId}, 'user-1', 'account', 'welcome', 'transactional', '{}', ${randomUUID()}, 'x', 0)`;
  await db.sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'email', 'pending')`;
  await db.sql`update notification_channels set status = ${status}, provider = 'sendgrid', provider_id = ${`sg-${id}`}, attempts = 1
    where notification_id = ${id}`;
  return id;
};

const received = (name: string, id?: string) =>
  receiver
    .received(name)
    .filter(
      (r) => id === undefined || (r.body as { data?: { notification_id?: string } }).data?.notification_id === id,
    );

t.test("a failing endpoint is retried on the schedule, then the delivery is dead, and a replay sends it", async (t) => {
  dispatching(t);
  await startSender(t);
  const hook = await endpoint("retry-client", "retry", ["channel.delivered"]);
  receiver.fault({ status: 503, match_name: "retry", times: 3 });
  const id = await notification(database, "retry-client");
  await eventually(
    async () => {
      const [row] = await database.sql`select status, attempts from webhook_deliveries where endpoint_id = ${hook.id}`;
      return row?.status === "dead" ? row : undefined;
    },
    15_000,
    "a dead delivery",
  );
  const attempts =
    await database.sql`select attempt, status_code from webhook_attempts where endpoint_id = ${hook.id} order by attempt`;
  t.same(
    attempts.map((a) => [a.attempt, a.status_code]),
    [
      [1, 503],
      [2, 503],
      [3, 503],
    ],
    "three attempts, as the schedule of two retries allows",
  );
  t.equal(received("retry", id).length, 3);
  const [event] =
    await database.sql`select id from webhook_events where notification_id = ${id} and type = 'channel.delivered'`;
  const replayed = await replayWebhookEvents(database, "retry-client", hook.id, { eventIds: [Number(event?.id)] });
  t.equal(replayed, 1);
  await eventually(
    async () => {
      const [row] = await database.sql`select status from webhook_deliveries where endpoint_id = ${hook.id}`;
      return row?.status === "delivered" ? true : undefined;
    },
    10_000,
    "the replayed delivery",
  );
  const posts = received("retry", id);
  t.equal(posts.length, 4);
  t.equal(new Set(posts.map((p) => p.webhook_id)).size, 1, "every attempt and the replay carry one webhook-id");
  t.ok(posts.every((p) => p.verified));
  const listed = await listWebhookAttempts(database, "retry-client", hook.id, 10);
  t.same(
    listed?.map((a) => [a.run, a.attempt, a.status_code]),
    [
      [1, 1, 204],
      [0, 3, 503],
      [0, 2, 503],
      [0, 1, 503],
    ],
    "the replay's post is listed as the first attempt of run 1, above the dead run's three",
  );
});

t.test("a replay after a delivery succeeded is a new run: its post is listed and counted", async (t) => {
  dispatching(t);
  await startSender(t);
  const hook = await endpoint("again-client", "again", ["channel.delivered"]);
  const id = await notification(database, "again-client");
  const delivered = async (run: number) =>
    eventually(
      async () => {
        const [row] = await database.sql`select status, run from webhook_deliveries where endpoint_id = ${hook.id}`;
        return row?.status === "delivered" && row.run === run ? true : undefined;
      },
      10_000,
      `run ${run} delivered`,
    );
  await delivered(0);
  const [event] =
    await database.sql`select id from webhook_events where notification_id = ${id} and type = 'channel.delivered'`;
  t.equal(await replayWebhookEvents(database, "again-client", hook.id, { eventIds: [Number(event?.id)] }), 1);
  await delivered(1);
  t.equal(received("again", id).length, 2, "the receiver heard the post and its replay");
  const listed = await listWebhookAttempts(database, "again-client", hook.id, 10);
  t.match(listed, [
    { event_type: "channel.delivered", run: 1, attempt: 1, status_code: 204 },
    { event_type: "channel.delivered", run: 0, attempt: 1, status_code: 204 },
  ]);
  t.equal(listed?.length, 2);
  const figures = (await readEndpointFigures(database, "again-client", [hook.id])).get(hook.id);
  t.match(figures?.last_hour, { attempts: 2, succeeded: 2, failed: 0 }, "the last hour's figures count the replay");
});

t.test("a connection the receiver drops is a failed attempt without a status, retried", async (t) => {
  dispatching(t);
  await startSender(t);
  const hook = await endpoint("drop-client", "drop", ["channel.delivered"]);
  receiver.fault({ drop: true, match_name: "drop", times: 1 });
  const id = await notification(database, "drop-client");
  await eventually(
    async () => {
      const [row] = await database.sql`select status from webhook_deliveries where endpoint_id = ${hook.id}`;
      return row?.status === "delivered" ? true : undefined;
    },
    15_000,
    "the delivery after the drop",
  );
  const attempts =
    await database.sql`select attempt, status_code, error from webhook_attempts where endpoint_id = ${hook.id} order by attempt`;
  t.match(attempts, [
    { attempt: 1, status_code: null, error: /\S/ },
    { attempt: 2, status_code: 204 },
  ]);
  t.same(
    received("drop", id).map((p) => p.answer),
    [0, 204],
    "the receiver lists the dropped post, then the retry",
  );
});

t.test("an endpoint failing for too long is disabled and what it was owed becomes dead", async (t) => {
  dispatching(t);
  await startSender(t, { schedule: [0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2], disableAfterMs: 500 });
  const hook = await endpoint("down-client", "down", ["channel.delivered"]);
  receiver.fault({ status: 500, match_name: "down" });
  await notification(database, "down-client");
  await notification(database, "down-client");
  await eventually(
    async () => {
      const [row] = await database.sql`select status, disabled_reason from webhook_endpoints where id = ${hook.id}`;
      return row?.status === "disabled" ? row : undefined;
    },
    15_000,
    "the endpoint disabled",
  );
  const [endpointRow] =
    await database.sql`select disabled_reason, failing_since from webhook_endpoints where id = ${hook.id}`;
  t.equal(endpointRow?.disabled_reason, "failing");
  const statuses = await database.sql`select status from webhook_deliveries where endpoint_id = ${hook.id}`;
  t.ok(
    statuses.every((s) => s.status === "dead"),
    "every delivery owed is a dead letter",
  );
  t.ok(
    log.lines().some((l) => l.includes("webhook endpoint disabled")),
    "the disabling is logged",
  );
  // A disabled endpoint is owed nothing new.
  await notification(database, "down-client");
  await sleep(300);
  t.equal((await database.sql`select count(*) from webhook_deliveries where endpoint_id = ${hook.id}`)[0]?.count, "2");
});

t.test("during a rotation's grace, posts carry signatures under the new and the old secret", async (t) => {
  dispatching(t);
  await startSender(t);
  const hook = await endpoint("rotate-client", "rotate-old", ["channel.delivered"]);
  const rotated = await rotateEndpointSecret(database, "rotate-client", hook.id, 3600);
  t.ok(rotated);
  // Two receivers' views of one endpoint: one still on the old secret, one on the new.
  await database.sql`update webhook_endpoints set url = ${`${receiver.url}/hooks/rotate-old`} where id = ${hook.id}`;
  receiver.setSecrets("rotate-old", [hook.secret]);
  const first = await notification(database, "rotate-client");
  await eventually(async () => (received("rotate-old", first).length === 1 ? true : undefined));
  t.ok(received("rotate-old", first)[0]?.verified, "verified with the old secret");
  t.equal(received("rotate-old", first)[0]?.webhook_id?.startsWith("evt_"), true);
  // One post during the grace carries both signatures, each verified by the reference library
  // under its own secret alone.
  const post = received("rotate-old", first)[0];
  const signatures = post?.webhook_signature?.split(" ") ?? [];
  t.equal(signatures.length, 2, "two signatures on one post");
  t.ok(
    signatures.every((s) => s.startsWith("v1,")),
    "each one v1",
  );
  const verifiedBy = (secret: string) =>
    signatures.filter((signature) => {
      try {
        new Webhook(secret).verify(JSON.stringify(post?.body), {
          "webhook-id": post?.webhook_id ?? "",
          "webhook-timestamp": post?.webhook_timestamp ?? "",
          "webhook-signature": signature,
        });
        return true;
      } catch {
        return false;
      }
    });
  const byNew = verifiedBy(rotated?.secret as string);
  const byOld = verifiedBy(hook.secret);
  t.equal(byNew.length, 1, "the new secret verifies one of them");
  t.equal(byOld.length, 1, "the old secret verifies one of them");
  t.not(byNew[0], byOld[0], "each its own");
  receiver.setSecrets("rotate-new", [rotated?.secret as string]);
  await database.sql`update webhook_endpoints set url = ${`${receiver.url}/hooks/rotate-new`} where id = ${hook.id}`;
  const second = await notification(database, "rotate-client");
  await eventually(async () => (received("rotate-new", second).length === 1 ? true : undefined));
  t.ok(received("rotate-new", second)[0]?.verified, "verified with the new secret");
  // After the grace, the old secret signs no more.
  await database.sql`update webhook_endpoints set previous_secret_expires_at = now() - interval '1 second' where id = ${hook.id}`;
  receiver.setSecrets("rotate-new", [hook.secret]);
  const third = await notification(database, "rotate-client");
  await eventually(async () => (received("rotate-new", third).length >= 1 ? true : undefined));
  t.notOk(received("rotate-new", third)[0]?.verified, "the old secret no longer verifies");
});

t.test("a client's endpoint hears only its own client's events", async (t) => {
  dispatching(t);
  await startSender(t);
  await endpoint("client-a", "iso-a");
  await endpoint("client-b", "iso-b");
  const a = await notification(database, "client-a");
  const b = await notification(database, "client-b");
  await eventually(async () =>
    received("iso-a", a).some((r) => r.type === "channel.delivered") &&
    received("iso-b", b).some((r) => r.type === "channel.delivered")
      ? true
      : undefined,
  );
  t.ok(
    received("iso-a").every((r) => (r.body as { data: { client_id: string } }).data.client_id === "client-a"),
    "A's endpoint: A's events only",
  );
  t.ok(
    received("iso-b").every((r) => (r.body as { data: { client_id: string } }).data.client_id === "client-b"),
    "B's endpoint: B's events only",
  );
  t.equal(received("iso-a", b).length, 0);
});

t.test("a slow endpoint does not hold up another endpoint's posts", async (t) => {
  dispatching(t);
  await startSender(t, { perEndpoint: 2, concurrency: 8 });
  await endpoint("slow-client", "slow", ["channel.delivered"]);
  await endpoint("fast-client", "fast", ["channel.delivered"]);
  receiver.fault({ delay_ms: 2000, match_name: "slow" });
  for (let i = 0; i < 20; i++) await notification(database, "slow-client");
  await sleep(200);
  const started = Date.now();
  for (let i = 0; i < 20; i++) await notification(database, "fast-client");
  await eventually(
    async () => (received("fast").length === 20 ? true : undefined),
    10_000,
    "the fast endpoint's posts",
  );
  // Served behind the slow endpoint, the fast one would wait for all 20 slow posts (20 s at two
  // in flight and 2 s each); a bound on the time itself would fail on a loaded machine.
  t.ok(
    received("slow").length < 20,
    `the slow endpoint is still being served when the fast one has its 20 posts (in ${Date.now() - started} ms)`,
  );
});

t.test("outside the development profile, an endpoint that resolves to a private address is never called", async (t) => {
  dispatching(t);
  await startSender(t, { allowPrivateNetworks: false, schedule: [] });
  const hook = await endpoint("ssrf-client", "ssrf", ["channel.delivered"]);
  // As if its name had been public when it was registered: localhost resolves to loopback now.
  const port = new URL(receiver.url).port;
  await database.sql`update webhook_endpoints set url = ${`https://localhost:${port}/hooks/ssrf`} where id = ${hook.id}`;
  await notification(database, "ssrf-client");
  const [attempt] = await eventually(async () => {
    const rows = await database.sql`select status_code, error from webhook_attempts where endpoint_id = ${hook.id}`;
    return rows.length > 0 ? rows : undefined;
  });
  t.equal(attempt?.status_code, null);
  t.match(attempt?.error, /private address/);
  await database.sql`update webhook_endpoints set url = ${`https://127.0.0.1:${port}/hooks/ssrf`} where id = ${hook.id}`;
  await notification(database, "ssrf-client");
  await eventually(async () => {
    const rows = await database.sql`select error from webhook_attempts where endpoint_id = ${hook.id} order by at`;
    return rows.length === 2 ? rows : undefined;
  });
  t.equal(received("ssrf").length, 0, "the receiver heard nothing");
});

t.test("a notification is completed once, whichever channel ends last, even at the same instant", async (t) => {
  await endpoint("done-client", "done", ["notification.completed"]);
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) {
    const id = randomUUID();
    ids.push(id);
    await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
      values (${id}, 'done-client', 'user-1', 'account', 'welcome', 'transactional', '{}', ${randomUUID()}, 'x', 0)`;
    await database.sql`insert into notification_channels (notification_id, channel, status)
      values (${id}, 'email', 'pending'), (${id}, 'sms', 'pending')`;
  }
  // Both channels of each notification end in two transactions at once.
  const end = (id: string, channel: string) =>
    database.sql.begin(async (sql) => {
      await sql`update notification_channels set status = 'delivered' where notification_id = ${id} and channel = ${channel}`;
      await sleep(20);
    });
  await Promise.all(ids.flatMap((id) => [end(id, "email"), end(id, "sms")]));
  while ((await checkCompletions(database, 500)) > 0) {}
  const events =
    await database.sql`select notification_id, data from webhook_events where type = 'notification.completed'
    and client_id = 'done-client'`;
  t.equal(events.length, 20, "one each");
  t.ok(events.every((e) => (e.data as { status: string }).status === "completed"));
});

t.test("events of one channel carry a sequence in the order they happened", async (t) => {
  await endpoint("order-client", "order", null);
  const id = randomUUID();
  await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, 'order-client', 'user-1', 'account', 'welcome', 'transactional', '{}', ${randomUUID()}, 'x', 0)`;
  await database.sql`insert into notification_channels (notification_id, channel, status, provider) values (${id}, 'email', 'pending', 'sendgrid')`;
  await database.sql`update notification_channels set provider = 'smtp', status = 'unsettled' where notification_id = ${id}`;
  await database.sql`update notification_channels set status = 'delivered' where notification_id = ${id}`;
  await database.sql`update notification_channels set status = 'bounced', reason = 'hard bounce' where notification_id = ${id}`;
  const events =
    await database.sql`select id, type, data from webhook_events where notification_id = ${id} order by id`;
  t.same(
    events.map((e) => e.type),
    ["notification.accepted", "provider.switched", "channel.unsettled", "channel.delivered", "channel.bounced"],
  );
  t.equal((events[1]?.data as { previous_provider?: string } | undefined)?.previous_provider, "sendgrid");
  t.equal((events[4]?.data as { reason?: string } | undefined)?.reason, "hard bounce");
});

t.test("an endpoint that asks for them is given the notification's data and the address; another is not", async (t) => {
  await endpoint(
    "include-client",
    "include-all",
    ["channel.delivered", "notification.completed"],
    ["notification_data", "recipient"],
  );
  await endpoint("include-client", "include-none", ["channel.delivered"]);
  await database.sql`insert into user_contacts (user_id, email, phone) values ('user-inc', 'ada@example.com', '+15550100')`;
  const id = randomUUID();
  await database.sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, 'include-client', 'user-inc', 'account', 'welcome', 'transactional', '{"name": "Ada"}', ${randomUUID()}, 'x', 0)`;
  await database.sql`insert into notification_channels (notification_id, channel, status) values (${id}, 'email', 'pending')`;
  await database.sql`update notification_channels set status = 'delivered' where notification_id = ${id}`;
  await startSender(t);
  dispatching(t);
  const posts = await eventually(async () => {
    const all = received("include-all", id);
    const none = received("include-none", id);
    return all.length === 2 && none.length === 1 ? { all, none } : undefined;
  });
  const body = (post: { body: unknown }) => post.body as { type: string; data: Record<string, unknown> };
  const delivered = posts.all.map(body).find((b) => b.type === "channel.delivered");
  t.same(delivered?.data.notification_data, { name: "Ada" });
  t.same(delivered?.data.recipient, { email: "ada@example.com" }, "the channel's own address only");
  const completed = posts.all.map(body).find((b) => b.type === "notification.completed");
  t.same(completed?.data.recipient, { email: "ada@example.com", phone: "+15550100" });
  const plain = body(posts.none[0] as { body: unknown }).data;
  t.notOk("notification_data" in plain || "recipient" in plain, "nothing beyond ids and outcomes");
  t.ok(
    [...posts.all, ...posts.none].every((p) => (p as { verified?: boolean }).verified === true),
    "every post verified",
  );
});
