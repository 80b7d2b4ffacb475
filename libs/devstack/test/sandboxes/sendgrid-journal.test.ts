import { generateKeyPairSync, randomUUID } from "node:crypto";
import { appendFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createSendgridProvider, sendgridPublicKey, verifySendgridSignature } from "@notify/providers";
import t from "tap";
import {
  type SendgridEvent,
  type SendgridJournalEntry,
  type StartSendgridSandboxOptions,
  startSendgridSandbox,
} from "../../src/index.js";
import { startReceiver, tempDir, until } from "./receiver.js";

const API_KEY = "SG.journal-test-key";
// Fixed across restarts, as the dev stack keeps it: receipts verify with one public key.
const webhookPrivateKey = generateKeyPairSync("ec", { namedCurve: "prime256v1" }).privateKey;

const start = (journal: string, options: StartSendgridSandboxOptions = {}) =>
  startSendgridSandbox({ apiKey: API_KEY, webhookPrivateKey, journal, ...options });

const send = (url: string, to = "ada@example.com") =>
  createSendgridProvider({ apiKey: API_KEY, baseUrl: url, from: "noreply@notify.example", timeoutMs: 2000 }).send({
    notificationId: randomUUID(),
    channel: "email",
    to,
    subject: "Welcome",
    body: "<p>Hello</p>",
    category: "welcome",
    priority: "transactional",
  });

const entries = (path: string): SendgridJournalEntry[] =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as SendgridJournalEntry);

const postedEvents = (body: string) => JSON.parse(body) as SendgridEvent[];

t.test("accepted mail survives a restart; DELETE survives one too", async (t) => {
  const journal = join(tempDir(t), "sandbox", "sendgrid.jsonl");
  const first = await start(journal);
  t.match(await send(first.url, "ada@example.com"), { outcome: "accepted" });
  const before = first.messages();
  await first.close();

  const second = await start(journal);
  t.same(second.messages(), before, "the mail of the earlier run, field for field");
  t.match(await send(second.url, "bob@example.com"), { outcome: "accepted" });
  const listed = (await (await fetch(`${second.url}/sandbox/messages`)).json()) as { data: { to: unknown }[] };
  t.same(
    listed.data.map((m) => m.to),
    [[{ email: "ada@example.com" }], [{ email: "bob@example.com" }]],
  );

  t.equal((await fetch(`${second.url}/sandbox/messages`, { method: "DELETE" })).status, 204);
  await second.close();
  const third = await start(journal);
  t.teardown(() => third.close());
  t.same(third.messages(), [], "forgotten mail stays forgotten");
});

t.test("a torn last line (a crash mid-write) is skipped", async (t) => {
  const journal = join(tempDir(t), "sendgrid.jsonl");
  const first = await start(journal);
  await send(first.url);
  await first.close();
  appendFileSync(journal, '{"type":"mail","message_id":"torn","mails":[{"message_id":"torn","to":[{"em');

  const second = await start(journal);
  t.equal(second.messages().length, 1);
  await send(second.url, "bob@example.com");
  await second.close();
  const third = await start(journal);
  t.teardown(() => third.close());
  t.same(
    third.messages().map((m) => m.to[0]?.email),
    ["ada@example.com", "bob@example.com"],
    "the next entry after the torn one was not glued to it",
  );
});

t.test("events the receiver did not acknowledge before a close are posted after the restart", async (t) => {
  const receiver = await startReceiver(t, () => 503);
  const eventWebhookUrl = `${receiver.origin}/webhooks/sendgrid`;
  const journal = join(tempDir(t), "sendgrid.jsonl");
  const first = await start(journal, { eventWebhookUrl });
  first.fault({ event: "bounce", times: 1 });
  t.match(await send(first.url), { outcome: "accepted" });
  await until(() => receiver.posts.length >= 1, "the first post");
  await first.close();
  const refused = receiver.posts.length;
  const [planned] = receiver.posts;
  if (!planned) throw new Error("nothing posted");
  t.same(first.eventPosts(), [], "a post still being retried is not reported as done");

  receiver.answer = () => 200;
  const second = await start(journal, { eventWebhookUrl });
  await second.settled();
  const reposts = receiver.posts.slice(refused);
  t.equal(reposts.length, 1, "posted once more, now acknowledged");
  const [repost] = reposts;
  if (!repost) throw new Error("nothing reposted");
  t.same(repost.body, planned.body, "the same events: kinds, sg_event_ids, timestamps");
  t.same(
    postedEvents(repost.body).map((e) => [e.event, e.type]),
    [
      ["processed", undefined],
      ["bounce", "bounce"],
    ],
    "the outcome planned at the send (the fault's bounce), not a delivery",
  );
  const signature = String(repost.headers["x-twilio-email-event-webhook-signature"]);
  const timestamp = String(repost.headers["x-twilio-email-event-webhook-timestamp"]);
  t.ok(
    verifySendgridSignature(sendgridPublicKey(second.webhookPublicKey), signature, timestamp, Buffer.from(repost.body)),
    "signed by the same key",
  );
  t.match(second.eventPosts(), [{ answer: 200 }]);
  const messageId = second.messages()[0]?.message_id;
  t.match(entries(journal).at(-1), { type: "acked", message_id: messageId });

  await second.close();
  const third = await start(journal, { eventWebhookUrl });
  t.teardown(() => third.close());
  await third.settled();
  t.equal(receiver.posts.length, refused + 1, "acknowledged events are not posted again");
});

t.test("acknowledged events are never posted again; unacknowledged ones outlive three tries", async (t) => {
  const receiver = await startReceiver(t, (n) => (n >= 1 && n <= 3 ? 503 : 200));
  const eventWebhookUrl = `${receiver.origin}/webhooks/sendgrid`;
  const journal = join(tempDir(t), "sendgrid.jsonl");
  const first = await start(journal, { eventWebhookUrl });
  await send(first.url, "ada@example.com");
  await first.settled();
  t.equal(receiver.posts.length, 1, "acknowledged at once");

  // Refused three times: in memory the sandbox would give up; journaled, it backs off and goes on.
  await send(first.url, "bob@example.com");
  await first.settled();
  t.same(
    receiver.posts.map((p) => p.status),
    [200, 503, 503, 503, 200],
  );
  t.same(
    first.eventPosts().map((p) => p.answer),
    [200, 200],
  );
  await first.close();

  const second = await start(journal, { eventWebhookUrl });
  t.teardown(() => second.close());
  await second.settled();
  t.equal(receiver.posts.length, 5, "nothing re-posted after the restart");
  t.equal(second.messages().length, 2);
});

t.test("without a journal the sandbox still gives up after three tries", async (t) => {
  const receiver = await startReceiver(t, () => 503);
  const sandbox = await startSendgridSandbox({
    apiKey: API_KEY,
    eventWebhookUrl: `${receiver.origin}/webhooks/sendgrid`,
  });
  t.teardown(() => sandbox.close());
  await send(sandbox.url);
  await sandbox.settled();
  t.equal(receiver.posts.length, 3);
  t.match(sandbox.eventPosts(), [{ answer: 503 }]);
});
