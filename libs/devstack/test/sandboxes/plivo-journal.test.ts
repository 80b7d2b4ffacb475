import { randomUUID } from "node:crypto";
import { appendFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createPlivoProvider, formParams, verifyPlivoSignature } from "@notify/providers";
import t from "tap";
import { type PlivoJournalEntry, type PlivoSandboxFault, startPlivoSandbox } from "../../src/index.js";
import { type ReceivedPost, type Receiver, startReceiver, tempDir, until } from "./receiver.js";

const AUTH_ID = "MAZDQ1ZJIYMDZKMTZKYM";
const AUTH_TOKEN = "plivo-journal-token";

const start = (journal: string) => startPlivoSandbox({ authId: AUTH_ID, authToken: AUTH_TOKEN, journal });

const send = (url: string, receiver?: Receiver, to = "+447700900123") =>
  createPlivoProvider({
    authId: AUTH_ID,
    authToken: AUTH_TOKEN,
    baseUrl: url,
    from: "+14155550100",
    ...(receiver === undefined ? {} : { reportUrl: `${receiver.origin}/webhooks/plivo` }),
    timeoutMs: 2000,
  }).send({
    notificationId: randomUUID(),
    channel: "sms",
    to,
    subject: null,
    body: "Your code is 123456",
    category: "otp",
    priority: "transactional",
  });

const report = (post: ReceivedPost) => Object.fromEntries(new URLSearchParams(post.body));

const signed = (post: ReceivedPost) =>
  verifyPlivoSignature(AUTH_TOKEN, {
    method: "POST",
    url: post.url,
    params: formParams(new URLSearchParams(post.body)),
    headers: (name) => {
      const value = post.headers[name];
      return typeof value === "string" ? value : undefined;
    },
  });

const entries = (path: string): PlivoJournalEntry[] =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as PlivoJournalEntry);

t.test("accepted messages survive a restart; DELETE survives one too", async (t) => {
  const journal = join(tempDir(t), "sandbox", "plivo.jsonl");
  const first = await start(journal);
  t.match(await send(first.url), { outcome: "accepted" });
  const before = first.messages();
  await first.close();

  const second = await start(journal);
  t.same(second.messages(), before);
  t.match(await send(second.url, undefined, "+447700900456"), { outcome: "accepted" });
  const listed = (await (await fetch(`${second.url}/sandbox/messages`)).json()) as { data: { dst: string }[] };
  t.same(
    listed.data.map((m) => m.dst),
    ["+447700900123", "+447700900456"],
  );
  t.equal((await fetch(`${second.url}/sandbox/messages`, { method: "DELETE" })).status, 204);
  await second.close();

  const third = await start(journal);
  t.teardown(() => third.close());
  t.same(third.messages(), [], "forgotten messages stay forgotten");
});

t.test("a torn last line (a crash mid-write) is skipped", async (t) => {
  const journal = join(tempDir(t), "plivo.jsonl");
  const first = await start(journal);
  await send(first.url);
  await first.close();
  appendFileSync(journal, '{"type":"message","message":{"message_uuid":"');

  const second = await start(journal);
  t.equal(second.messages().length, 1);
  await send(second.url, undefined, "+447700900456");
  await second.close();
  const third = await start(journal);
  t.teardown(() => third.close());
  t.same(
    third.messages().map((m) => m.dst),
    ["+447700900123", "+447700900456"],
  );
});

t.test("reports the receiver did not acknowledge before a close are posted after the restart", async (t) => {
  const receiver = await startReceiver(t, () => 503);
  const journal = join(tempDir(t), "plivo.jsonl");
  const first = await start(journal);
  const fault: PlivoSandboxFault = { report_status: "undelivered", error_code: "20", times: 1 };
  first.fault(fault);
  t.match(await send(first.url, receiver), { outcome: "accepted" });
  await until(() => receiver.posts.length >= 1, "the first report");
  await first.close();
  const refused = receiver.posts.length;
  const [message] = first.messages();
  if (!message) throw new Error("nothing accepted");

  receiver.answer = () => 200;
  const second = await start(journal);
  await second.settled();
  const reposts = receiver.posts.slice(refused);
  t.same(
    reposts.map(report),
    [
      { MessageUUID: message.message_uuid, From: "+14155550100", To: "+447700900123", Units: "1", Status: "sent" },
      {
        MessageUUID: message.message_uuid,
        From: "+14155550100",
        To: "+447700900123",
        Units: "1",
        Status: "undelivered",
        ErrorCode: "20",
      },
    ],
    "sent, then the status planned at the send (the fault's), in order",
  );
  t.same(reposts.map(signed), ["v3", "v3"], "signed with the account's token");
  t.ok(
    reposts.every((p) => p.url.startsWith(`${receiver.origin}/webhooks/plivo?notification_id=`)),
    "to the URL the sender gave",
  );
  t.same(
    second.reports().map((r) => [r.params.Status, r.answer]),
    [
      ["sent", 200],
      ["undelivered", 200],
    ],
  );
  t.match(entries(journal).slice(-2), [
    { type: "acked", message_uuid: message.message_uuid, status: "sent" },
    { type: "acked", message_uuid: message.message_uuid, status: "undelivered" },
  ]);
  await second.close();

  const third = await start(journal);
  t.teardown(() => third.close());
  await third.settled();
  t.equal(receiver.posts.length, refused + 2, "acknowledged reports are not posted again");
});

t.test("only the reports not yet acknowledged are posted again", async (t) => {
  // `sent` is acknowledged; the final report is refused until the restart.
  const receiver = await startReceiver(t, (n) => (n === 0 ? 200 : 503));
  const journal = join(tempDir(t), "plivo.jsonl");
  const first = await start(journal);
  await send(first.url, receiver);
  await until(() => receiver.posts.length >= 2, "the final report");
  await first.close();
  t.same(
    first.reports().map((r) => r.params.Status),
    ["sent"],
  );

  const before = receiver.posts.length;
  receiver.answer = () => 200;
  const second = await start(journal);
  t.teardown(() => second.close());
  await second.settled();
  t.same(
    receiver.posts.slice(before).map((p) => report(p).Status),
    ["delivered"],
  );
});

t.test("a message without a report URL has nothing to post after a restart", async (t) => {
  const journal = join(tempDir(t), "plivo.jsonl");
  const first = await start(journal);
  await send(first.url);
  await first.close();
  t.match(entries(journal), [{ type: "message", reports: [] }]);
  const second = await start(journal);
  t.teardown(() => second.close());
  await second.settled();
  t.same(second.reports(), []);
});
