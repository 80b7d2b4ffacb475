import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import {
  ChannelProvidersConfig,
  createEmailFailoverProvider,
  createSmtpProvider,
  type OutboundMessage,
  type Provider,
} from "@notify/providers";
import t, { type Test } from "tap";
import * as v from "valibot";
import {
  type RunningSmtpSandbox,
  type SmtpJournalEntry,
  type SmtpSandboxFault,
  type SmtpSandboxMessage,
  startSmtpSandbox,
} from "../../src/sandboxes/smtp.js";
import { tempDir, until } from "./receiver.js";

const USER = "notify";
const PASSWORD = "smtp-sandbox-test";

const start = (journal?: string) =>
  startSmtpSandbox({ user: USER, password: PASSWORD, ...(journal === undefined ? {} : { journal }) });

const sandbox = await start();
t.teardown(() => sandbox.close());
t.beforeEach(() => sandbox.reset());

function provider(t: Test, target: RunningSmtpSandbox = sandbox, timeoutMs = 2000): Provider {
  const created = createSmtpProvider({
    url: target.smtpUrl,
    from: "noreply@notify.example",
    fromName: "Notify",
    timeoutMs,
    requireTls: false,
  });
  t.teardown(() => created.close?.());
  return created;
}

const message = (to = "ada@example.com"): OutboundMessage => ({
  notificationId: randomUUID(),
  channel: "email",
  to,
  subject: "Welcome",
  body: "<p>Hello <b>Ada</b></p>",
  category: "welcome",
  priority: "transactional",
});

const listed = async (query = "", target = sandbox): Promise<SmtpSandboxMessage[]> =>
  ((await (await fetch(`${target.url}/sandbox/messages${query}`)).json()) as { data: SmtpSandboxMessage[] }).data;

const postFault = (fault: unknown) =>
  fetch(`${sandbox.url}/sandbox/faults`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(fault),
  });

t.test("keeps what nodemailer sent and lists it, newest last", async (t) => {
  const smtp = provider(t);
  const first = message();
  t.same(await smtp.send(first), { outcome: "accepted", providerId: `${first.notificationId}@notify.example` });
  t.match(await smtp.send(message("grace@example.com")), { outcome: "accepted" });
  const data = await listed();
  t.equal(data.length, 2);
  t.match(data[0], {
    from: '"Notify" <noreply@notify.example>',
    to: ["ada@example.com"],
    subject: "Welcome",
    text: "Hello Ada",
    html: "<p>Hello <b>Ada</b></p>",
    message_id: `${first.notificationId}@notify.example`,
    notification_id: first.notificationId,
    received_at: String,
    id: String,
  });
  t.same(data[1]?.to, ["grace@example.com"]);
  t.same(
    (await listed("?to=GRACE@example.com")).map((m) => m.to),
    [["grace@example.com"]],
    "filtered by recipient",
  );
  t.equal((await fetch(`${sandbox.url}/sandbox/messages`, { method: "DELETE" })).status, 204);
  t.same(await listed(), []);
});

t.test("AUTH with other credentials is refused: a permanent failure", async (t) => {
  const smtp = createSmtpProvider({
    url: sandbox.smtpUrl.replace(PASSWORD, "wrong"),
    from: "noreply@notify.example",
    timeoutMs: 2000,
    requireTls: false,
  });
  t.teardown(() => smtp.close?.());
  t.match(await smtp.send(message()), { outcome: "permanent", status: 535 });
  t.same(sandbox.messages(), []);
});

t.test("a fault by count answers that many messages, then the sandbox accepts again", async (t) => {
  const smtp = provider(t);
  t.equal((await postFault({ code: 451, times: 2 })).status, 204);
  t.match(await smtp.send(message()), { outcome: "transient", status: 451 });
  t.match(await smtp.send(message()), { outcome: "transient", status: 451 });
  t.match(await smtp.send(message()), { outcome: "accepted" });
  t.equal(sandbox.messages().length, 1, "refused messages are not kept");
});

t.test("a fault by time lasts that long, however many messages meet it", async (t) => {
  const smtp = provider(t);
  const ends = Date.now() + 1500;
  t.equal((await postFault({ code: 550, for_ms: 1500 })).status, 204);
  for (let i = 0; i < 3; i++) t.match(await smtp.send(message()), { outcome: "permanent", status: 550 });
  await sleep(Math.max(0, ends - Date.now()) + 50);
  t.match(await smtp.send(message()), { outcome: "accepted" });
});

t.test("match_to picks the recipient a fault is for", async (t) => {
  const smtp = provider(t);
  sandbox.fault({ code: 550, match_to: "Eve@example.com" });
  t.match(await smtp.send(message("ada@example.com")), { outcome: "accepted" });
  t.match(await smtp.send(message("eve@example.com")), { outcome: "permanent", status: 550 });
  t.same(
    sandbox.messages().map((m) => m.to),
    [["ada@example.com"]],
  );
});

t.test("at rcpt, the recipient is refused before the message is sent", async (t) => {
  const smtp = provider(t);
  sandbox.fault({ code: 450, at: "rcpt", times: 1 });
  t.match(await smtp.send(message()), { outcome: "transient", status: 450 });
  sandbox.fault({ drop: true, at: "rcpt", times: 1 });
  t.match(await smtp.send(message()), { outcome: "transient", notSent: true });
  t.same(sandbox.messages(), []);
});

t.test("a drop after the message: an unknown outcome, and the sandbox kept it", async (t) => {
  const smtp = provider(t);
  sandbox.fault({ drop: true, times: 1 });
  const result = await smtp.send(message());
  t.match(result, { outcome: "transient" });
  t.notOk("notSent" in result || "status" in result, "neither refused nor unsent");
  t.equal(sandbox.messages().length, 1);
  t.match(await smtp.send(message()), { outcome: "accepted" }, "the next one goes through");
});

t.test("delay_ms holds the reply: past the sender's deadline, an unknown outcome", async (t) => {
  const smtp = provider(t, sandbox, 300);
  sandbox.fault({ delay_ms: 1000, times: 1 });
  const sending = smtp.send(message());
  await until(() => sandbox.holding() === 1, "the held reply");
  t.same(await sending, { outcome: "transient", reason: "smtp timed out after 300 ms" });
  await until(() => sandbox.holding() === 0, "the reply's end");
  t.equal(sandbox.messages().length, 1, "held, then queued: the sender could not know");
  sandbox.fault({ delay_ms: 100, code: 451, times: 1 });
  t.match(await provider(t).send(message()), { outcome: "transient", status: 451 }, "a delay before a code");
});

t.test("fault requests are checked; DELETE clears them", async (t) => {
  const bad = await postFault({ times: 1 });
  t.equal(bad.status, 400);
  t.match(await bad.json(), { error: /needs a code, a delay_ms or drop/ });
  t.equal((await postFault({ drop: true, code: 451 })).status, 400);
  t.equal((await postFault({ code: 200 })).status, 400);
  t.equal((await postFault({ code: 550 })).status, 204);
  t.equal((await fetch(`${sandbox.url}/sandbox/faults`, { method: "DELETE" })).status, 204);
  t.match(await provider(t).send(message()), { outcome: "accepted" });
  t.throws(() => sandbox.fault({ code: 700 } as SmtpSandboxFault));
});

t.test("accepted messages survive a restart; DELETE survives one too", async (t) => {
  const journal = join(tempDir(t), "sandbox", "smtp.jsonl");
  const first = await start(journal);
  t.match(await provider(t, first).send(message()), { outcome: "accepted" });
  const before = first.messages();
  await first.close();

  const second = await start(journal);
  t.same(second.messages(), before);
  t.match(await provider(t, second).send(message("grace@example.com")), { outcome: "accepted" });
  t.same(
    (await listed("", second)).map((m) => m.to[0]),
    ["ada@example.com", "grace@example.com"],
  );
  t.equal((await fetch(`${second.url}/sandbox/messages`, { method: "DELETE" })).status, 204);
  await second.close();
  const lines = readFileSync(journal, "utf8").split("\n").filter(Boolean);
  t.same(
    lines.map((line) => (JSON.parse(line) as SmtpJournalEntry).type),
    ["message", "message", "clear"],
  );

  const third = await start(journal);
  t.teardown(() => third.close());
  t.same(third.messages(), [], "forgotten messages stay forgotten");
});

const configIssues = (env: Record<string, string>) => {
  const result = v.safeParse(ChannelProvidersConfig, env, { abortEarly: false });
  return result.success ? [] : result.issues.map((i) => `${v.getDotPath(i)}: ${i.message}`);
};

t.test("the failover settings: what each mode needs", async (t) => {
  const email = { EMAIL_PROVIDER: "sandbox", SENDGRID_API_KEY: "SG.sandbox", SENDGRID_BASE_URL: "http://127.0.0.1:1" };
  t.same(configIssues(email), [], "off by default");
  t.same(configIssues({ ...email, EMAIL_FAILOVER_PROVIDER: "smtp" }), [
    "SMTP_URL: is required when EMAIL_FAILOVER_PROVIDER is not off",
  ]);
  t.same(configIssues({ ...email, EMAIL_FAILOVER_PROVIDER: "smtp", SMTP_URL: "https://u:p@relay.example" }), [
    "SMTP_URL: must be an smtp:// or smtps:// URL with a host",
  ]);
  t.same(configIssues({ EMAIL_FAILOVER_PROVIDER: "sandbox", SMTP_URL: "smtps://u:p@relay.example" }), [
    "EMAIL_FAILOVER_PROVIDER: needs EMAIL_PROVIDER (the provider it fails over from)",
  ]);
  t.match(configIssues({ ...email, EMAIL_FAILOVER_PROVIDER: "mailgun" }), [
    /EMAIL_FAILOVER_PROVIDER: must be smtp, sandbox or off/,
  ]);
  t.same(configIssues({ ...email, EMAIL_FAILOVER_PROVIDER: "smtp", SMTP_URL: "smtp://u:p@relay.example:587" }), []);
});

t.test("createEmailFailoverProvider: the SMTP provider on the sandbox, or none when off", async (t) => {
  const email = { EMAIL_PROVIDER: "sandbox", SENDGRID_API_KEY: "SG.sandbox", SENDGRID_BASE_URL: "http://127.0.0.1:1" };
  t.equal(await createEmailFailoverProvider(v.parse(ChannelProvidersConfig, email), { timeoutMs: 2000 }), undefined);
  await t.rejects(
    createEmailFailoverProvider(v.parse(ChannelProvidersConfig, {}), { timeoutMs: 2000 }).then(() =>
      createEmailFailoverProvider(
        { ...v.parse(ChannelProvidersConfig, {}), EMAIL_FAILOVER_PROVIDER: "sandbox" },
        {
          timeoutMs: 2000,
        },
      ),
    ),
    /SMTP_URL: is required/,
  );
  const config = v.parse(ChannelProvidersConfig, {
    ...email,
    EMAIL_FROM: "noreply@notify.example",
    EMAIL_FAILOVER_PROVIDER: "sandbox",
    SMTP_URL: sandbox.smtpUrl,
  });
  const failover = await createEmailFailoverProvider(config, { timeoutMs: 2000 });
  t.teardown(() => failover?.close?.());
  t.equal(failover?.name, "smtp");
  const sent = message();
  t.same(await failover?.send(sent), { outcome: "accepted", providerId: `${sent.notificationId}@notify.example` });
  t.match(sandbox.messages(), [{ from: '"Notify" <noreply@notify.example>', notification_id: sent.notificationId }]);
});

t.test("the real relay mode insists on STARTTLS: the sandbox, which has none, is refused before AUTH", async (t) => {
  const config = v.parse(ChannelProvidersConfig, {
    EMAIL_PROVIDER: "sandbox",
    SENDGRID_API_KEY: "SG.sandbox",
    SENDGRID_BASE_URL: "http://127.0.0.1:1",
    EMAIL_FAILOVER_PROVIDER: "smtp",
    SMTP_URL: sandbox.smtpUrl,
  });
  const failover = await createEmailFailoverProvider(config, { timeoutMs: 2000 });
  t.teardown(() => failover?.close?.());
  const result = await failover?.send(message());
  t.match(result, { outcome: "permanent", reason: /STARTTLS/ });
  t.notMatch(JSON.stringify(result), PASSWORD);
  t.same(sandbox.messages(), []);
});
