import { randomUUID } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { newId } from "@notify/core";
import {
  createDb,
  type Database,
  narrowOutboxRow,
  purgeCapCounts,
  purgeThrottleSlots,
  removePushSubscription,
  removeUnpublished,
  seedApiKey,
} from "@notify/db";
import { SAMPLE_NOTIFICATION, SAMPLE_USER } from "@notify/devstack";
import {
  eventually,
  freshAppRoles,
  freshDatabase,
  idAt,
  postNotification,
  seedNotification,
  settledView,
  startTestStack,
} from "@notify/testing";
import t from "tap";

// The whole service as compose runs it on Postgres: each app as its own role, made by the
// migrate job's applyAppRoles (libs/db/src/setup/roles.ts), the superuser only migrating and seeding.
// Every route family of the API, every channel, a fallback, a broadcast, a dead letter replayed,
// quiet hours released, receipts early and late, the sweeps and purges, an archive: everything
// works, and no app logged a statement Postgres refused. A few paths that need a NATS failure to
// run (an unpublished batch released) are called directly, as their app's role.
const { url, database } = await freshDatabase(t);
const { urls, undecided } = await freshAppRoles(t, url);
// A receipt that never matched a send, for days: the receipts sweep's first purge deletes it.
const stale = `stale-${randomUUID()}`;
await database.sql`
  insert into provider_receipts (provider, event_id, provider_id, status, payload, received_at)
  values ('plivo', ${stale}, 'no-such-message', 'delivered', '{}', now() - interval '100 hours')`;
const refused: string[] = [];
const { stack, dataDir } = await startTestStack(t, {
  databaseUrl: url,
  appSettings: {
    ingest: { DATABASE_URL: urls.ingest, RECOVERY_INTERVAL_MS: "200", RECOVERY_GRACE_MS: "500" },
    processor: {
      DATABASE_URL: urls.processor,
      // The periodic work runs within the test's time: archiving, sweeps, timers.
      RETENTION_DAYS: "1",
      RETENTION_INTERVAL_MS: "1000",
      RECONCILE_INTERVAL_MS: "1000",
      RECONCILE_AFTER_SECONDS: "5",
      DEFERRED_POLL_INTERVAL_MS: "200",
      FALLBACK_POLL_INTERVAL_MS: "200",
      BROADCAST_POLL_INTERVAL_MS: "200",
      PREFERENCE_CACHE_TTL_MS: "0",
    },
    workers: { DATABASE_URL: urls.workers },
    receipts: { DATABASE_URL: urls.receipts, RECEIPT_SWEEP_INTERVAL_MS: "200" },
  },
  onLine: (app, line) => {
    if (/permission denied|42501/i.test(line)) refused.push(`[${app}] ${line}`);
  },
});
// A key for every route: operator includes every client scope.
const key = await seedApiKey(database, { clientId: "dev", name: "roles test", scopes: ["operator"] });
const base = stack.baseUrl;
// A webhook endpoint wanting every event type, with addresses and data: every app's changes run
// the event triggers as that app's role, and the workers' senders read what it asks for.
const hook = await fetch(`${base}/api/v1/webhook-endpoints`, {
  method: "POST",
  headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
  body: JSON.stringify({
    url: `${stack.sandboxes.webhooks}/hooks/roles`,
    include: ["notification_data", "recipient"],
  }),
});
if (hook.status !== 201) throw new Error(`POST /webhook-endpoints: ${hook.status} ${await hook.text()}`);
await fetch(`${stack.sandboxes.webhooks}/sandbox/secrets/roles`, {
  method: "PUT",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ secrets: [((await hook.json()) as { secret: string }).secret] }),
});

async function api<T = Record<string, unknown>>(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: T }> {
  const response = await fetch(`${base}/api/v1${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: (text === "" ? {} : JSON.parse(text)) as T };
}

const as = (app: keyof typeof urls): Database => {
  const db = createDb({ url: urls[app], max: 1 });
  t.teardown(() => db.close());
  return db;
};

t.test("the roles were made for every table the schema has", async (t) => {
  t.same(undecided, [], "no table is left to no app (libs/db/src/setup/roles.ts TABLE_ACCESS)");
});

t.test("keys, templates, preferences and contacts through the API", async (t) => {
  const created = await api<{ id: string; key: string }>("POST", "/keys", {
    name: "short-lived",
    client_id: "dev",
    scopes: ["read"],
  });
  t.equal(created.status, 201);
  t.equal((await api("GET", "/keys")).status, 200);
  t.equal((await api("GET", `/keys/${created.body.id}`)).status, 200);
  const rotated = await api<{ id: string }>("POST", `/keys/${created.body.id}/rotate`, { grace_seconds: 0 });
  t.equal(rotated.status, 201);
  t.equal((await api("DELETE", `/keys/${rotated.body.id}`)).status, 204);

  const template = await api("PUT", "/templates/roles", {
    default_locale: "en",
    params: ["name"],
    variants: [{ channel: "email", locale: "en", subject: "Hi", body_template: "Hi <%= it.name %>" }],
  });
  t.ok([200, 201].includes(template.status), `template written (${template.status})`);
  t.equal((await api("GET", "/templates")).status, 200);
  t.equal((await api("GET", "/templates/roles")).status, 200);

  t.equal((await api("PUT", "/users/roles-u1/contacts", { email: "u1@example.com", phone: null })).status, 200);
  t.equal((await api("GET", "/users/roles-u1/contacts")).status, 200);
  t.equal((await api("PUT", "/users/roles-u1/preferences", { rate_cap_per_day: 1 })).status, 200);
  t.equal((await api("GET", "/users/roles-u1/preferences")).status, 200);
});

t.test("all four channels, a dead letter read and replayed, the timeline, the operator's views", async (t) => {
  const fault = await fetch(`${stack.sandboxes.sendgrid}/sandbox/faults`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ status: 400, match_to: SAMPLE_USER.email, times: 1 }),
  });
  t.equal(fault.status, 204);
  const idempotencyKey = randomUUID();
  const id = await postNotification(base, key, SAMPLE_NOTIFICATION, { idempotencyKey });
  t.equal(await postNotification(base, key, SAMPLE_NOTIFICATION, { idempotencyKey }), id, "a repeat finds the first");
  const view = await settledView(base, key, id);
  t.match(view.channels, {
    push: { status: "delivered" },
    sms: { status: /^(sent|delivered)$/ },
    in_app: { status: "delivered" },
    email: { status: "failed" },
  });
  const letters = await eventually(async () => {
    const page = await api<{ data: Array<{ seq: number; channel: string }> }>(
      "GET",
      `/dead-letters?notification_id=${id}`,
    );
    return page.body.data?.length ? page.body.data : undefined;
  });
  const seq = letters[0]?.seq as number;
  t.equal((await api("GET", `/dead-letters/${seq}`)).status, 200, "a letter with its channel's state and history");
  const replay = await api<{ replayed: number }>("POST", "/dead-letters/replay", { seqs: [seq] });
  t.equal(replay.status, 200);
  t.equal(replay.body.replayed, 1, "the processor replayed it");
  await eventually(async () => {
    const { body } = await api<{ channels: Record<string, { status: string }> }>("GET", `/notifications/${id}`);
    return body.channels.email?.status === "delivered" ? true : undefined;
  }, 30_000);

  t.equal((await api("GET", `/notifications/${id}`)).status, 200, "with its timeline");
  t.equal((await api("GET", `/users/${SAMPLE_USER.userId}/notifications`)).status, 200);
  t.equal((await api("GET", `/ops/notifications?user_id=${SAMPLE_USER.userId}`)).status, 200);
  t.equal((await api("GET", `/ops/notifications/${id}`)).status, 200);
  t.equal((await api("GET", "/ops/streams")).status, 200);
});

t.test("the inbox: a token minted, items read, marked and streamed", async (t) => {
  const minted = await api<{ token: string }>("POST", `/users/${SAMPLE_USER.userId}/inbox-tokens`, {});
  t.equal(minted.status, 201);
  const inbox = { "x-inbox-token": minted.body.token };
  const page = await eventually(async () => {
    const { body } = await api<{ data: Array<{ id: string }> }>("GET", "/inbox", undefined, inbox);
    return body.data?.length ? body.data : undefined;
  });
  t.equal((await api("PATCH", `/inbox/${page[0]?.id}`, { read: true }, inbox)).status, 200);
  t.equal((await api("GET", "/inbox/counts", undefined, inbox)).status, 200);
  t.equal((await api("POST", "/inbox/mark-all", { action: "seen" }, inbox)).status, 200);
  t.equal((await api("GET", "/inbox/preferences", undefined, inbox)).status, 200, "the user's categories");
  t.equal((await api("PATCH", "/inbox/preferences", { time_zone: "Europe/London" }, inbox)).status, 200);
  const stream = new AbortController();
  const response = await fetch(`${base}/api/v1/inbox/stream`, { headers: inbox, signal: stream.signal });
  t.equal(response.status, 200, "a stream LISTENs for new items");
  await postNotification(base, key, { ...SAMPLE_NOTIFICATION, channels: ["in_app"] });
  const reader = response.body?.getReader();
  const seen = await reader?.read();
  t.ok(seen?.value?.length, "the stream answered");
  stream.abort();
});

t.test("a fallback waits for a confirmation, then takes its step", async (t) => {
  const id = await postNotification(base, key, {
    ...SAMPLE_NOTIFICATION,
    channels: ["push"],
    fallback: [{ channel: "sms", when: ["unconfirmed"], confirm_within_seconds: 1 }],
  });
  const view = await eventually(async () => {
    const { body } = await api<{ channels: Record<string, { status: string }> }>("GET", `/notifications/${id}`);
    return body.channels.sms ? body : undefined;
  }, 30_000);
  t.ok(view.channels.sms, "the step added the SMS channel");
});

t.test("a throttle: its slot taken when routed, the next one of its key throttled", async (t) => {
  const throttled = {
    ...SAMPLE_NOTIFICATION,
    user_id: "roles-u1",
    channels: ["email"],
    throttle: { key: "roles", limit: 1, per: "1h" },
  };
  const first = await settledView(base, key, await postNotification(base, key, throttled));
  const second = await settledView(base, key, await postNotification(base, key, throttled));
  t.match(
    second.channels.email,
    { status: "suppressed", reason: "throttled" },
    `the limit of 1 holds (first: ${first.channels.email?.status})`,
  );
});

t.test("a promotional cap and quiet hours: the slot taken, the timer released", async (t) => {
  const promotional = { ...SAMPLE_NOTIFICATION, user_id: "roles-u1", priority: "promotional", channels: ["email"] };
  const first = await settledView(base, key, await postNotification(base, key, promotional));
  const second = await settledView(base, key, await postNotification(base, key, promotional));
  t.match(
    second.channels.email,
    { status: "suppressed" },
    `the cap of 1 holds (first: ${first.channels.email?.status})`,
  );

  const hour = new Date().getUTCHours();
  const quiet = {
    start: `${String(hour).padStart(2, "0")}:00`,
    end: `${String((hour + 2) % 24).padStart(2, "0")}:00`,
    tz: "UTC",
  };
  await api("PUT", "/users/roles-u2/contacts", { email: "u2@example.com", phone: null });
  await api("PUT", "/users/roles-u2/preferences", { quiet_hours: quiet });
  const id = await postNotification(base, key, { ...promotional, user_id: "roles-u2" });
  await eventually(async () => {
    const { body } = await api<{ channels: Record<string, { status: string }> }>("GET", `/notifications/${id}`);
    return body.channels.email?.status === "deferred" ? true : undefined;
  });
  // The night is over: the timer is due now.
  await api("PUT", "/users/roles-u2/preferences", { quiet_hours: null });
  await database.sql`update deferred_notifications set due_at = now() where notification_id = ${id}`;
  const released = await settledView(base, key, id);
  t.not(released.channels.email?.status, "deferred", "the processor released it");
});

t.test("an audience, a broadcast expanded, its progress, paused and cancelled by the operator", async (t) => {
  const audience = await api<{ id: string }>("POST", "/audiences", { name: "roles" });
  t.equal(audience.status, 201);
  const members = await fetch(`${base}/api/v1/audiences/${audience.body.id}/members/import`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/x-ndjson" },
    body: `"${SAMPLE_USER.userId}"\n"roles-b2"\n"roles-b3"\n`,
  });
  t.equal(members.status, 200);
  t.equal((await api("PUT", `/audiences/${audience.body.id}/members/roles-b4`)).status, 204);
  t.equal((await api("DELETE", `/audiences/${audience.body.id}/members/roles-b4`)).status, 204);
  t.equal((await api("GET", "/audiences")).status, 200);
  t.equal((await api("GET", `/audiences/${audience.body.id}`)).status, 200);
  const broadcast = await api<{ broadcast_id: string }>(
    "POST",
    "/broadcasts",
    { audience_id: audience.body.id, category: "deals", template_id: "welcome", data: { name: "all" } },
    { "idempotency-key": randomUUID() },
  );
  t.equal(broadcast.status, 202);
  const id = broadcast.body.broadcast_id;
  await eventually(async () => {
    const { body } = await api<{ status: string; expanded: number }>("GET", `/broadcasts/${id}`);
    return body.status === "expanded" ? body : undefined;
  }, 30_000);
  t.equal((await api("GET", "/ops/broadcasts")).status, 200);
  const second = await api<{ broadcast_id: string }>(
    "POST",
    "/broadcasts",
    { audience_id: audience.body.id, category: "deals", template_id: "welcome", data: { name: "again" } },
    { "idempotency-key": randomUUID() },
  );
  for (const action of ["pause", "resume", "cancel"]) {
    t.equal((await api("POST", `/ops/broadcasts/${second.body.broadcast_id}/${action}`)).status, 200, action);
  }
});

t.test("receipts before their send and never matched; stalled and unrouted work; an archive", async (t) => {
  // A receipt stored before its send was recorded: the receipts sweep applies it.
  const [sms] = await database.sql<{ notification_id: string; provider: string; provider_id: string }[]>`
    select notification_id, provider, provider_id from notification_channels
    where channel = 'sms' and provider_id is not null limit 1`;
  t.ok(sms, "an SMS was sent");
  await database.sql`
    insert into provider_receipts (provider, event_id, provider_id, status, payload)
    values (${sms?.provider as string}, ${`early-${randomUUID()}`}, ${sms?.provider_id as string}, 'delivered', '{}')`;
  // A channel no worker took for a minute, and a notification never routed: the reconciler's.
  const stalled = newId();
  await seedNotification(database, { id: stalled, clientId: "dev", userId: SAMPLE_USER.userId });
  await database.sql`update notifications set data = '{"name": "Ada"}' where id = ${stalled}`;
  await database.sql`insert into notification_channels (notification_id, channel, status, updated_at)
    values (${stalled}, 'email', 'pending', now() - interval '1 minute')`;
  const unrouted = newId();
  await seedNotification(database, { id: unrouted, clientId: "dev", userId: SAMPLE_USER.userId });
  await database.sql`update notifications set data = '{"name": "Ada"}' where id = ${unrouted}`;
  // A delivered notification three days old (its id made then, as ingest made it): archived and
  // deleted, row by row or with its partition, as the processor's role.
  const threeDaysAgo = Date.now() - 3 * 86_400_000;
  const old = idAt(threeDaysAgo);
  await seedNotification(database, {
    id: old,
    clientId: "dev",
    userId: SAMPLE_USER.userId,
    createdAt: new Date(threeDaysAgo),
  });
  await database.sql`insert into notification_channels (notification_id, channel, status)
    values (${old}, 'in_app', 'delivered')`;

  await eventually(
    async () => {
      const [row] = await database.sql<{ applied: number; stale: number; routed: number; archived: number }[]>`
        select
          (select count(*)::int from provider_receipts where event_id like 'early-%' and applied_at is not null) as applied,
          (select count(*)::int from provider_receipts where event_id = ${stale}) as stale,
          (select count(*)::int from notification_channels where notification_id = ${unrouted}) as routed,
          (select count(*)::int from notifications where id = ${old}) as archived`;
      return row?.applied === 1 && row.stale === 0 && row.routed > 0 && row.archived === 0 ? row : undefined;
    },
    30_000,
    "the early receipt applied, the stale one purged, the unrouted one routed, the old one archived",
  );
  const archive = join(dataDir, "archive");
  t.ok(existsSync(archive) && readdirSync(archive).length > 0, "the archive file was written");
  const [touched] = await database.sql<{ recent: boolean }[]>`
    select updated_at > now() - interval '50 seconds' as recent from notification_channels
    where notification_id = ${stalled}`;
  t.ok(touched?.recent, "the stalled channel was touched and driven on");
});

t.test("paths a NATS failure runs, called as their app's role", async (t) => {
  const ingest = as("ingest");
  const id = newId();
  await seedNotification(database, { id, clientId: "dev", userId: "roles-gone" });
  const [row] = await database.sql<{ id: string }[]>`
    insert into publish_outbox (notification_ids) values (${[id]}::text[]) returning id::text`;
  await narrowOutboxRow(ingest, row?.id as string, [id]);
  t.equal(await removeUnpublished(ingest, row?.id as string, [id]), 1, "ingest releases an unpublished batch");
  const workers = as("workers");
  await database.sql`insert into user_preferences (user_id, device_tokens)
    values ('roles-gone', ${database.sql.json([{ endpoint: "https://push.example/gone", keys: {} }] as never)})`;
  t.ok(
    await removePushSubscription(workers.sql, "roles-gone", "https://push.example/gone"),
    "workers drop a gone subscription",
  );
  t.equal(await purgeCapCounts(as("processor"), "2000-01-01"), 0, "the processor purges old counters");
  t.equal(await purgeThrottleSlots(as("processor"), new Date(0)), 0, "and old throttle slots");
});

t.test("the webhook endpoint heard every kind of change, signed, with what it asked for", async (t) => {
  const wanted = [
    "notification.accepted",
    "channel.delivered",
    "channel.suppressed",
    "notification.completed",
    "broadcast.expanded",
    "broadcast.completed",
  ];
  const posts = await eventually(
    async () => {
      const response = await fetch(`${stack.sandboxes.webhooks}/sandbox/received?name=roles`);
      const all = (await response.json()) as Array<{
        type: string;
        verified: boolean;
        body: { data: Record<string, unknown> };
      }>;
      const types = new Set(all.map((p) => p.type));
      return wanted.every((type) => types.has(type)) ? all : undefined;
    },
    60_000,
    `posts of ${wanted.join(", ")}`,
  );
  t.ok(
    posts.every((p) => p.verified),
    "every post verified",
  );
  const delivered = posts.find((p) => p.type === "channel.delivered" && p.body.data.channel === "email");
  t.ok(delivered?.body.data.notification_data, "the notification's data, read by the workers' role");
  t.ok(delivered?.body.data.recipient, "the address, read by the workers' role");
});

t.test("no app's statement was refused by Postgres", async (t) => {
  // A moment for the last periodic rounds to log.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  t.same(refused, []);
});
