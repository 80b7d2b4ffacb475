import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import type { ProviderAnswer } from "@notify/core";
import fc from "fast-check";
import { type ParsedMail, simpleParser } from "mailparser";
import { SMTPServer, type SMTPServerSession } from "smtp-server";
import t, { type Test } from "tap";
import type { OutboundMessage, Provider } from "../src/provider.js";
import { createSmtpProvider, type SmtpConfig } from "../src/smtp/provider.js";

// A bare smtp-server stands in for the relay (the SMTP sandbox lives in @notify/devstack, which
// depends on this package): nodemailer speaks the real protocol to it, and each test scripts
// what the relay answers.

const USER = "relay-user";
const PASSWORD = "relay-pass";

/** What the relay answers: at RCPT, or at the end of the message (DATA). */
type Answer = { code: number; text?: string } | { drop: true } | { delayMs: number };

interface Relay {
  port: number;
  received: ParsedMail[];
  /** The answer to the next recipients and messages; unset: accept. */
  rcpt?: Answer;
  data?: Answer;
  /** Credentials the relay accepts. */
  password: string;
  /** The AUTH failure text (the relay may echo what it was given). */
  authFailure: (password: string) => string;
}

const errorWith = (code: number, text: string) => Object.assign(new Error(text), { responseCode: code });

async function startRelay(t: Test): Promise<Relay> {
  const relay: Relay = {
    port: 0,
    received: [],
    password: PASSWORD,
    authFailure: () => "Authentication credentials invalid",
  };
  const drop = (session: SMTPServerSession) => {
    for (const connection of server.connections) if (connection.id === session.id) connection._socket.destroy();
  };
  const answer = async (script: Answer, session: SMTPServerSession, callback: (error?: Error) => void) => {
    if ("delayMs" in script) {
      await sleep(script.delayMs, undefined, { ref: false });
      return callback();
    }
    if ("drop" in script) return drop(session);
    callback(errorWith(script.code, script.text ?? "scripted"));
  };
  const server = new SMTPServer({
    authMethods: ["PLAIN", "LOGIN"],
    allowInsecureAuth: true,
    disabledCommands: ["STARTTLS"],
    disableReverseLookup: true,
    logger: false,
    onAuth: (auth, _session, callback) => {
      if (auth.username === USER && auth.password === relay.password) return callback(null, { user: USER });
      callback(errorWith(535, relay.authFailure(auth.password ?? "")));
    },
    onRcptTo: (_address, session, callback) => {
      if (relay.rcpt === undefined) return callback();
      void answer(relay.rcpt, session, callback);
    },
    onData: (stream, session, callback) => {
      void simpleParser(stream).then((parsed) => {
        if (relay.data === undefined) {
          relay.received.push(parsed);
          return callback(null, "OK: queued as ABC123");
        }
        // A relay that drops or holds its reply may still have queued the message.
        if (!("code" in relay.data)) relay.received.push(parsed);
        void answer(relay.data, session, callback);
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  relay.port = (server.server.address() as { port: number }).port;
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const connection of server.connections) connection._socket.destroy();
      }),
  );
  return relay;
}

function provider(t: Test, port: number, overrides: Partial<SmtpConfig> = {}): Provider {
  const created = createSmtpProvider({
    url: `smtp://${USER}:${PASSWORD}@127.0.0.1:${port}`,
    from: "noreply@notify.example",
    fromName: "Notify",
    timeoutMs: 2000,
    requireTls: false,
    ...overrides,
  });
  t.teardown(() => created.close?.());
  return created;
}

const message = (overrides: Partial<OutboundMessage> = {}): OutboundMessage => ({
  notificationId: randomUUID(),
  channel: "email",
  to: "ada@example.com",
  subject: "Welcome",
  body: "<html><body><h1>Hello</h1><p>Hello &amp; welcome, Ada</p></body></html>",
  category: "welcome",
  priority: "transactional",
  ...overrides,
});

/** A port nothing listens on: taken, then given back. */
async function closedPort(): Promise<number> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

t.test("an accepted message carries html, text, the notification id and a Message-ID of its own", async (t) => {
  const relay = await startRelay(t);
  const smtp = provider(t, relay.port);
  const msg = message();
  const result = await smtp.send(msg);
  t.same(result, { outcome: "accepted", providerId: `${msg.notificationId}@notify.example` });
  const [mail, ...rest] = relay.received;
  t.same(rest, []);
  if (!mail) throw new Error("the relay received nothing");
  t.equal(mail.subject, "Welcome");
  t.match(mail.html, /<p>Hello &amp; welcome, Ada<\/p>/);
  t.equal(mail.text?.trim(), "Hello\n\nHello & welcome, Ada");
  t.equal(mail.headers.get("x-notification-id"), msg.notificationId);
  t.equal(mail.messageId, `<${msg.notificationId}@notify.example>`);
  t.equal(mail.from?.text, '"Notify" <noreply@notify.example>');
  t.equal(smtp.name, "smtp");
  t.equal(smtp.channel, "email");

  t.same(await smtp.send(msg), result, "a resend carries the same Message-ID");
  t.equal(relay.received[1]?.messageId, mail.messageId);
});

t.test("sends share pooled connections", async (t) => {
  const relay = await startRelay(t);
  const smtp = provider(t, relay.port);
  const results = await Promise.all(Array.from({ length: 12 }, () => smtp.send(message())));
  t.ok(results.every((r) => r.outcome === "accepted"));
  t.equal(relay.received.length, 12);
});

t.test("a 4xx reply is transient with its status, a 5xx permanent: the relay queued nothing", async (t) => {
  const relay = await startRelay(t);
  const smtp = provider(t, relay.port);
  relay.data = { code: 451, text: "Try again later" };
  t.match(await smtp.send(message()), {
    outcome: "transient",
    status: 451,
    reason: /^smtp 451 at DATA: 451 .*Try again later/,
  });
  t.notOk("notSent" in (await smtp.send(message())), "a reply needs no notSent: its status says it");
  relay.data = { code: 550, text: "Mailbox unavailable" };
  t.match(await smtp.send(message()), { outcome: "permanent", status: 550, reason: /Mailbox unavailable/ });
  relay.data = undefined;
  t.match(await smtp.send(message()), { outcome: "accepted" }, "the connection is still good after a refusal");
  t.equal(relay.received.length, 1);
});

t.test("a recipient refused at RCPT is classified by its code too", async (t) => {
  const relay = await startRelay(t);
  const smtp = provider(t, relay.port);
  relay.rcpt = { code: 450, text: "Mailbox busy" };
  t.match(await smtp.send(message()), { outcome: "transient", status: 450 });
  relay.rcpt = { code: 550, text: "No such user" };
  t.match(await smtp.send(message()), { outcome: "permanent", status: 550, reason: /No such user/ });
});

t.test("a relay nobody listens at: transient and notSent", async (t) => {
  const smtp = provider(t, await closedPort());
  const result = await smtp.send(message());
  t.match(result, { outcome: "transient", notSent: true, reason: /ECONNREFUSED/ });
  t.notOk("status" in result);
});

t.test("a connection dropped before the message was sent: notSent", async (t) => {
  const relay = await startRelay(t);
  relay.rcpt = { drop: true };
  const result = await provider(t, relay.port).send(message());
  t.match(result, { outcome: "transient", notSent: true });
  t.notOk("status" in result);
});

t.test("a connection dropped after the message was sent: an unknown outcome", async (t) => {
  const relay = await startRelay(t);
  relay.data = { drop: true };
  const result = await provider(t, relay.port).send(message());
  t.match(result, { outcome: "transient", reason: /^smtp connection failed/ });
  t.notOk("notSent" in result, "the relay may have queued it");
  t.notOk("status" in result);
  t.equal(relay.received.length, 1, "and here it had");
});

t.test("a reply held past the deadline: timed out, an unknown outcome, within the deadline", async (t) => {
  const relay = await startRelay(t);
  const smtp = provider(t, relay.port, { timeoutMs: 500 });
  relay.data = { delayMs: 3000 };
  const started = Date.now();
  const result = await smtp.send(message());
  const elapsed = Date.now() - started;
  t.same(result, { outcome: "transient", reason: "smtp timed out after 500 ms" });
  t.ok(elapsed >= 450 && elapsed < 1500, `returned after ${elapsed} ms, not at the relay's reply`);
  relay.data = undefined;
  t.match(await smtp.send(message()), { outcome: "accepted" }, "the pool recovers from the abandoned session");
});

t.test("a deadline met before the message was sent: notSent", async (t) => {
  const relay = await startRelay(t);
  relay.rcpt = { delayMs: 3000 };
  const result = await provider(t, relay.port, { timeoutMs: 400 }).send(message());
  t.same(result, { outcome: "transient", reason: "smtp timed out after 400 ms", notSent: true });
});

t.test("credentials the relay refuses are permanent: configuration, not the message", async (t) => {
  const relay = await startRelay(t);
  relay.password = "another-password";
  const result = await provider(t, relay.port).send(message());
  t.match(result, { outcome: "permanent", status: 535, reason: /refused the credentials/ });
  t.equal(relay.received.length, 0);
});

t.test("the password never appears in a reason, whatever the relay echoes", async (t) => {
  const relay = await startRelay(t);
  const base64 = (text: string) => Buffer.from(text).toString("base64");
  relay.authFailure = (given) => `bad login ${given} ${base64(given)} ${base64(`\u0000${USER}\u0000${given}`)}`;
  await fc.assert(
    fc.asyncProperty(
      fc.string({ minLength: 8, maxLength: 40, unit: "grapheme-ascii" }),
      fc.boolean(),
      async (password, authenticates) => {
        relay.password = authenticates ? password : `${password}-not`;
        relay.data = {
          code: 554,
          text: `rejected for ${password} (${base64(password)}) ${encodeURIComponent(password)}`,
        };
        const smtp = createSmtpProvider({
          url: `smtp://${USER}:${encodeURIComponent(password)}@127.0.0.1:${relay.port}`,
          from: "noreply@notify.example",
          timeoutMs: 2000,
          requireTls: false,
        });
        try {
          const result: ProviderAnswer = await smtp.send(message());
          if (result.outcome === "accepted") return false;
          return (
            !result.reason.includes(password) &&
            !result.reason.includes(base64(password)) &&
            !result.reason.includes(encodeURIComponent(password))
          );
        } finally {
          await smtp.close?.();
        }
      },
    ),
    { numRuns: 25 },
  );
});

t.test("a message it cannot send as it is: permanent, without a connection", async (t) => {
  const smtp = provider(t, await closedPort());
  t.same(await smtp.send(message({ subject: null })), { outcome: "permanent", reason: "an email needs a subject" });
  t.match(await smtp.send(message({ to: "ada@example.com, eve@example.com" })), {
    outcome: "permanent",
    reason: /not a single email address/,
  });
});

t.test("a URL that is not smtp(s) is refused without quoting it", async (t) => {
  t.throws(() => createSmtpProvider({ url: "http://u:secret@host", from: "a@b.c", timeoutMs: 1, requireTls: false }), {
    message: /must be smtp:\/\/ or smtps:\/\//,
  });
  try {
    createSmtpProvider({ url: "smtp//u:secret@", from: "a@b.c", timeoutMs: 1, requireTls: false });
    t.fail("a non-URL was taken");
  } catch (error) {
    t.notMatch(String(error), /secret/);
  }
});
