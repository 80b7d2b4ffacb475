import { generateKeyPairSync, sign } from "node:crypto";
import { startSendgridSandbox } from "@notify/devstack";
import { createSendgridProvider } from "@notify/providers";
import { eventually } from "@notify/testing";
import t from "tap";
import { createApp } from "../src/app.js";
import { channelRow, newId, recordSend, seedChannel, startReceipts } from "./support.js";

const API_KEY = "SG.receipts-test";
const sandboxKeys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const receipts = await startReceipts(t, {
  sendgridPublicKey: sandboxKeys.publicKey.export({ format: "der", type: "spki" }).toString("base64"),
});
const { sql } = receipts;
const sandbox = await startSendgridSandbox({
  apiKey: API_KEY,
  eventWebhookUrl: `${receipts.url}/webhooks/sendgrid`,
  webhookPrivateKey: sandboxKeys.privateKey,
});
t.teardown(() => sandbox.close());

const provider = createSendgridProvider({
  apiKey: API_KEY,
  baseUrl: sandbox.url,
  from: "noreply@notify.example",
  timeoutMs: 3000,
});

const email = (notificationId: string) => ({
  notificationId,
  channel: "email" as const,
  to: "ada@example.com",
  subject: "Welcome",
  body: "<p>Hi</p>",
  category: "account",
  priority: "transactional" as const,
});

const settledAs = (id: string, status: string) =>
  eventually(
    async () => {
      const row = await channelRow(sql, id, "email");
      return row?.status === status ? row : undefined;
    },
    15_000,
    `email ${status}`,
  );

t.test("the sandbox's signed delivered event settles an unsettled channel", async (t) => {
  const id = await seedChannel(sql, { channel: "email", status: "pending" });
  const result = await provider.send(email(id));
  if (result.outcome !== "accepted") throw new Error(`not accepted: ${result.reason}`);
  await recordSend(sql, id, "email", "sendgrid", result.providerId, "unsettled");
  t.equal((await settledAs(id, "delivered")).provider_id, result.providerId);
  await sandbox.settled();
  t.same(
    sandbox.eventPosts().map((p) => [p.answer, p.events.map((e) => e.event)]),
    [[200, ["processed", "delivered"]]],
  );
});

t.test("custom_args bind a channel whose send was never recorded (a worker died after the send)", async (t) => {
  const id = await seedChannel(sql, { channel: "email", status: "unsettled" });
  const result = await provider.send(email(id));
  if (result.outcome !== "accepted") throw new Error("not accepted");
  const row = await settledAs(id, "delivered");
  t.equal(row.provider_id, result.providerId);
});

t.test("hard and soft bounces and drops move a delivered channel to bounced", async (t) => {
  const cases = [
    ["bounce", /^hard bounce: 5\.1\.1 550/],
    ["blocked", /^soft bounce: 4\.7\.1 421/],
    ["dropped", /^dropped: Bounced Address$/],
  ] as const;
  for (const [event, reason] of cases) {
    sandbox.fault({ event, times: 1 });
    const id = await seedChannel(sql, { channel: "email", status: "pending" });
    const result = await provider.send(email(id));
    if (result.outcome !== "accepted") throw new Error("not accepted");
    await recordSend(sql, id, "email", "sendgrid", result.providerId);
    t.match((await settledAs(id, "bounced")).reason, reason, event);
  }
});

t.test("a bounce reported later through /sandbox/events; a late delivered never undoes it", async (t) => {
  const id = await seedChannel(sql, { channel: "email", status: "pending" });
  const result = await provider.send(email(id));
  if (result.outcome !== "accepted") throw new Error("not accepted");
  await recordSend(sql, id, "email", "sendgrid", result.providerId);
  await sandbox.settled();
  const res = await fetch(`${sandbox.url}/sandbox/events`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ message_id: result.providerId, event: "bounce" }),
  });
  t.equal(res.status, 200);
  await settledAs(id, "bounced");
  await sandbox.report({ message_id: result.providerId, event: "delivered" });
  t.equal((await channelRow(sql, id, "email"))?.status, "bounced");
});

// Vectors signed here with node:crypto over timestamp + body, independently of our helpers.
const testKeys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const app = createApp({
  database: receipts.database,
  bus: receipts.bus,
  log: receipts.log,
  isStopping: () => false,
  sendgridPublicKey: testKeys.publicKey.export({ format: "pem", type: "spki" }).toString(),
});
const signedPost = (
  body: string,
  options: { key?: typeof testKeys.privateKey; timestamp?: string; tamper?: boolean } = {},
) => {
  const timestamp = options.timestamp ?? String(Math.floor(Date.now() / 1000));
  const signature = sign("sha256", Buffer.from(timestamp + body), options.key ?? testKeys.privateKey).toString(
    "base64",
  );
  return app.request("/webhooks/sendgrid", {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-twilio-email-event-webhook-signature": signature,
      "x-twilio-email-event-webhook-timestamp": timestamp,
    },
    body: options.tamper ? body.replace("bounce", "delivered") : body,
  });
};
const event = (messageId: string, fields: Record<string, unknown>) => ({
  email: "ada@example.com",
  timestamp: 1_700_000_000,
  sg_event_id: newId(),
  sg_message_id: `${messageId}.filterdrecv-5645d9c87f-2jx6w-1-6564F1A0-3.0`,
  ...fields,
});
const count = async () => Number((await sql`select count(*)::int as n from provider_receipts`)[0]?.n);

t.test("a batch is deduplicated by sg_event_id and applied once", async (t) => {
  const messageId = newId();
  const id = await seedChannel(sql, {
    channel: "email",
    status: "delivered",
    provider: "sendgrid",
    providerId: messageId,
  });
  const body = JSON.stringify([
    event(messageId, { event: "processed" }),
    event(messageId, { event: "bounce", type: "bounce", status: "5.0.0", reason: "mailbox unknown" }),
    event(messageId, { event: "open" }),
  ]);
  const before = await count();
  t.equal((await signedPost(body)).status, 200);
  t.equal((await signedPost(body)).status, 200, "SendGrid's retry of the same batch");
  t.equal(await count(), before + 3);
  t.match(await channelRow(sql, id, "email"), { status: "bounced", reason: "hard bounce: 5.0.0 mailbox unknown" });
  const [events] = await sql`select count(*)::int as n from channel_status_events where notification_id = ${id}`;
  t.equal(events?.n, 1);
});

t.test("an event for a send not recorded yet is kept, then applied", async (t) => {
  const messageId = newId();
  const id = await seedChannel(sql, { channel: "email", status: "pending" });
  t.equal(
    (await signedPost(JSON.stringify([event(messageId, { event: "dropped", reason: "Unsubscribed Address" })]))).status,
    200,
  );
  t.equal((await channelRow(sql, id, "email"))?.status, "pending");
  await recordSend(sql, id, "email", "sendgrid", messageId);
  t.equal((await settledAs(id, "bounced")).reason, "dropped: Unsubscribed Address");
});

t.test("missing, foreign or tampered signatures are refused and nothing is stored", async (t) => {
  const before = await count();
  const body = JSON.stringify([event(newId(), { event: "bounce", type: "bounce" })]);
  const unsigned = await app.request("/webhooks/sendgrid", {
    method: "POST",
    body,
    headers: { "content-type": "application/json" },
  });
  t.equal(unsigned.status, 401);
  t.equal(
    (await signedPost(body, { key: generateKeyPairSync("ec", { namedCurve: "prime256v1" }).privateKey })).status,
    401,
  );
  t.equal((await signedPost(body, { tamper: true })).status, 401);
  const garbage = await app.request("/webhooks/sendgrid", {
    method: "POST",
    body,
    headers: { "x-twilio-email-event-webhook-signature": "not-der", "x-twilio-email-event-webhook-timestamp": "1" },
  });
  t.equal(garbage.status, 401);
  t.equal(await count(), before);
});

t.test("a signed timestamp outside the window (a replay, or a clock far ahead) is refused", async (t) => {
  const before = await count();
  const now = Math.floor(Date.now() / 1000);
  const body = () => JSON.stringify([event(newId(), { event: "bounce", type: "bounce" })]);
  for (const [timestamp, why] of [
    ["1700000000", "a batch signed in 2023"],
    [String(now - 700), "older than RECEIPTS_MAX_AGE_SECONDS (600)"],
    [String(now + 300), "more than 60 s ahead"],
    ["-5", "not a number of seconds"],
    [`${now}.5`, "not whole seconds"],
  ] as const) {
    const res = await signedPost(body(), { timestamp });
    t.equal(res.status, 401, why);
    t.match(await res.json(), { code: "unauthenticated", detail: /within 600 s before and 60 s after now/ }, why);
  }
  t.equal(await count(), before, "nothing stored");
  t.equal((await signedPost(body(), { timestamp: String(now - 500) })).status, 200, "500 s old: inside");
  t.equal((await signedPost(body(), { timestamp: String(now + 30) })).status, 200, "30 s ahead: inside");
  t.equal(await count(), before + 2);
});

t.test("the window is configurable", async (t) => {
  const strict = createApp({
    database: receipts.database,
    bus: receipts.bus,
    log: receipts.log,
    isStopping: () => false,
    sendgridPublicKey: testKeys.publicKey.export({ format: "pem", type: "spki" }).toString(),
    timestampWindow: { maxAgeSeconds: 30, maxFutureSeconds: 0 },
  });
  const body = JSON.stringify([event(newId(), { event: "open" })]);
  const post = (timestamp: number) =>
    strict.request("/webhooks/sendgrid", {
      method: "POST",
      headers: {
        "x-twilio-email-event-webhook-signature": sign(
          "sha256",
          Buffer.from(String(timestamp) + body),
          testKeys.privateKey,
        ).toString("base64"),
        "x-twilio-email-event-webhook-timestamp": String(timestamp),
      },
      body,
    });
  const now = Math.floor(Date.now() / 1000);
  t.equal((await post(now - 60)).status, 401);
  t.equal((await post(now + 10)).status, 401);
  t.equal((await post(now - 5)).status, 200);
});

t.test("a signed body that is not an array is a 400; events without ids are skipped", async (t) => {
  t.equal((await signedPost(JSON.stringify({ event: "delivered" }))).status, 400);
  const before = await count();
  t.equal((await signedPost(JSON.stringify([{ event: "delivered" }]))).status, 200);
  t.equal(await count(), before);
});
