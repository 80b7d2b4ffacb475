import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { type Context, Hono } from "hono";
import { simpleParser } from "mailparser";
import {
  SMTPServer,
  type SMTPServerAddress,
  type SMTPServerAuthentication,
  type SMTPServerDataStream,
  type SMTPServerSession,
} from "smtp-server";
import * as v from "valibot";
import { FaultSpan, faultQueue } from "./faults.js";
import { openJournal } from "./journal.js";
import { serveApp } from "./serve.js";

/** One message the sandbox accepted, as a relay would have queued it. */
export interface SmtpSandboxMessage {
  id: string;
  /** The From header, as written (`"Name" <address>`). */
  from: string;
  /** The envelope's recipients (RCPT TO): where a relay would deliver it. */
  to: string[];
  subject: string;
  text: string | null;
  html: string | null;
  /** The Message-ID header, without its angle brackets. */
  message_id: string | null;
  /** The X-Notification-Id header. */
  notification_id: string | null;
  /**
   * Every header field as received, by lower-cased name, unfolded (a repeated field's values
   * joined by ", "); absent from messages journaled before the sandbox kept them.
   */
  headers?: Record<string, string>;
  received_at: string;
}

/**
 * What the next matching messages meet instead of `250 OK`, at the stage `at` names: `rcpt`
 * answers the recipient, before any of the message is sent (nothing can have been queued);
 * `data` (the default) answers the end of the message. `code` replies with that code (4xx:
 * try later, 5xx: refused); `delay_ms` holds the reply first (then 250, or `code`); `drop`
 * closes the connection without a reply. A message dropped at `data` is kept, as by a relay
 * that queued it and lost the connection before its reply: the sender cannot know.
 */
export const SmtpSandboxFault = v.pipe(
  v.object({
    code: v.optional(v.pipe(v.number(), v.integer(), v.minValue(400), v.maxValue(599))),
    delay_ms: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))),
    drop: v.optional(v.boolean()),
    at: v.optional(v.picklist(["rcpt", "data"]), "data"),
    ...FaultSpan,
    /** Only messages to this recipient (case-insensitive). */
    match_to: v.optional(v.pipe(v.string(), v.email())),
  }),
  v.check(
    (f) => f.code !== undefined || f.delay_ms !== undefined || f.drop === true,
    "a fault needs a code, a delay_ms or drop",
  ),
  v.check((f) => !(f.drop === true && f.code !== undefined), "a dropped connection answers no code"),
);
export type SmtpSandboxFault = v.InferInput<typeof SmtpSandboxFault>;
type Fault = v.InferOutput<typeof SmtpSandboxFault>;

/** The journal's lines: `message`, one accepted message; `clear`, the messages before it were forgotten. */
export type SmtpJournalEntry = { type: "message"; message: SmtpSandboxMessage } | { type: "clear" };

export interface SmtpSandboxOptions {
  /** SMTP port; 0 (the default) picks a free one. */
  port?: number;
  /** Port of the HTTP control routes; 0 (the default) picks a free one. */
  httpPort?: number;
  /** Loopback by default: the sandbox accepts any mail and has no auth on its control routes. */
  host?: string;
  /** The credentials AUTH (PLAIN or LOGIN) must give, as a relay checks its accounts. */
  user: string;
  password: string;
  /**
   * A JSON Lines file (created 0600 with its folder) that makes the sandbox durable: accepted
   * messages are written to it before the reply and read back at start. In memory when unset.
   */
  journal?: string;
}

export interface RunningSmtpSandbox {
  /** Serves the `/sandbox/*` control routes. */
  readonly app: Hono;
  /** The control routes' origin, e.g. http://127.0.0.1:54321 */
  readonly url: string;
  /** The SMTP port. */
  readonly port: number;
  readonly httpPort: number;
  /** What a sender is configured with: smtp://user:password@host:port */
  readonly smtpUrl: string;
  messages(): SmtpSandboxMessage[];
  /** Forgets messages (durably, with a journal) and clears every fault. */
  reset(): void;
  fault(fault: SmtpSandboxFault): void;
  /** Replies a `delay_ms` fault is holding right now. */
  holding(): number;
  close(): Promise<void>;
}

// The largest message taken, as relays advertise with SIZE; a bigger one is answered 552.
const MAX_MESSAGE_BYTES = 10 * 1024 * 1024;

const digest = (value: string): Buffer => createHash("sha256").update(value).digest();

/** An error smtp-server answers with `code` and `text`. */
const reply = (code: number, text: string): Error & { responseCode: number } =>
  Object.assign(new Error(text), { responseCode: code });

const faultReply = (code: number): Error =>
  reply(code, code < 500 ? "Sandbox fault: try again later" : "Sandbox fault: message refused");

const headerText = (value: unknown): string | null => {
  if (typeof value === "string") return value;
  if (value !== null && typeof value === "object" && "text" in value && typeof value.text === "string") {
    return value.text;
  }
  return null;
};

/** The raw header fields, as a mail client shows them in "view source": not parsed into objects. */
function rawHeaders(lines: ReadonlyArray<{ key: string; line: string }>): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const { key, line } of lines) {
    const value = line
      .slice(line.indexOf(":") + 1)
      .replace(/\r?\n[ \t]+/g, " ")
      .trim();
    headers[key] = headers[key] === undefined ? value : `${headers[key]}, ${value}`;
  }
  return headers;
}

const withoutBrackets = (id: string | undefined): string | null => (id === undefined ? null : id.replace(/^<|>$/g, ""));

/** Reads one message off the wire the way a mail client would. */
async function parseMessage(stream: SMTPServerDataStream, session: SMTPServerSession): Promise<SmtpSandboxMessage> {
  const parsed = await simpleParser(stream, { skipImageLinks: true, skipTextToHtml: true });
  return {
    id: randomUUID(),
    from: parsed.from?.text ?? (session.envelope.mailFrom ? session.envelope.mailFrom.address : ""),
    to: session.envelope.rcptTo.map((address) => address.address),
    subject: parsed.subject ?? "",
    text: parsed.text ?? null,
    html: typeof parsed.html === "string" ? parsed.html : null,
    message_id: withoutBrackets(parsed.messageId),
    notification_id: headerText(parsed.headers.get("x-notification-id")),
    headers: rawHeaders(parsed.headerLines),
    received_at: new Date().toISOString(),
  };
}

/**
 * An SMTP relay for the development stack and tests: the real wire protocol (nodemailer talks
 * to it as to any relay), AUTH PLAIN/LOGIN against one account, every accepted message kept
 * and listed over HTTP, and scripted faults. No TLS: STARTTLS is not offered (there is no
 * certificate to trust), and AUTH is allowed in clear, which only a loopback sandbox may do.
 */
export async function startSmtpSandbox(options: SmtpSandboxOptions): Promise<RunningSmtpSandbox> {
  const host = options.host ?? "127.0.0.1";
  let messages: SmtpSandboxMessage[] = [];
  let holding = 0;
  const faults = faultQueue<Fault>();
  const journal = options.journal === undefined ? undefined : openJournal<SmtpJournalEntry>(options.journal);
  for (const entry of journal?.entries ?? []) {
    if (entry.type === "message") messages.push(entry.message);
    else if (entry.type === "clear") messages = [];
  }

  const keep = (message: SmtpSandboxMessage): void => {
    // Written before the reply: a message the sender was told was queued is never forgotten.
    journal?.append({ type: "message", message });
    messages.push(message);
  };
  const forgetMessages = (): void => {
    journal?.append({ type: "clear" });
    messages = [];
  };
  const addFault = (input: SmtpSandboxFault): void => faults.add(v.parse(SmtpSandboxFault, input));
  const takeFault = (at: "rcpt" | "data", recipients: string[]): Fault | undefined =>
    faults.take((f) => f.at === at && (f.match_to === undefined || recipients.includes(f.match_to.toLowerCase())));

  // Unref'd so a reply held past the end of a test never keeps the process alive.
  const hold = async (ms: number): Promise<void> => {
    holding += 1;
    try {
      await sleep(ms, undefined, { ref: false });
    } finally {
      holding -= 1;
    }
  };

  const server: SMTPServer = new SMTPServer({
    name: "smtp-sandbox.notify.localhost",
    banner: "notify SMTP sandbox",
    authMethods: ["PLAIN", "LOGIN"],
    allowInsecureAuth: true,
    disabledCommands: ["STARTTLS"],
    size: MAX_MESSAGE_BYTES,
    disableReverseLookup: true,
    logger: false,
    onAuth: (auth: SMTPServerAuthentication, _session, callback) => {
      const user = auth.username ?? "";
      const password = auth.password ?? "";
      const valid =
        timingSafeEqual(digest(user), digest(options.user)) &&
        timingSafeEqual(digest(password), digest(options.password));
      if (!valid) return callback(reply(535, "Authentication credentials invalid"));
      callback(null, { user });
    },
    onRcptTo: (address: SMTPServerAddress, session, callback) => {
      const fault = takeFault("rcpt", [address.address.toLowerCase()]);
      if (fault === undefined) return callback();
      void answer(fault, callback, () => dropSession(session));
    },
    onData: (stream, session, callback) => {
      void (async () => {
        let message: SmtpSandboxMessage;
        try {
          message = await parseMessage(stream, session);
        } catch (error) {
          return callback(reply(451, `Sandbox could not parse the message: ${String(error)}`));
        }
        if (stream.sizeExceeded) return callback(reply(552, "Message exceeds the maximum size"));
        const fault = takeFault(
          "data",
          message.to.map((to) => to.toLowerCase()),
        );
        if (fault === undefined) {
          keep(message);
          return callback(null, `OK: queued as ${message.id}`);
        }
        await answer(
          fault,
          (error) => {
            if (error === undefined) keep(message);
            callback(error ?? null, `OK: queued as ${message.id}`);
          },
          () => {
            keep(message);
            dropSession(session);
          },
        );
      })();
    },
  });

  /** Answers as the fault says: after its delay, with its code, or not at all (a drop). */
  async function answer(fault: Fault, callback: (error?: Error) => void, drop: () => void): Promise<void> {
    if (fault.delay_ms !== undefined) await hold(fault.delay_ms);
    if (fault.drop === true) return drop();
    callback(fault.code === undefined ? undefined : faultReply(fault.code));
  }

  /** Cuts the session's connection without a word, as a crashed relay or a broken network does. */
  function dropSession(session: SMTPServerSession): void {
    for (const connection of server.connections) {
      if (connection.session === session || connection.id === session.id) connection._socket.destroy();
    }
  }

  const smtpPort = await new Promise<number>((resolve, reject) => {
    server.once("error", reject);
    const listening = server.listen(options.port ?? 0, host, () => {
      server.removeListener("error", reject);
      const address = listening.address();
      resolve(typeof address === "object" && address !== null ? address.port : 0);
    });
  });
  // A client that goes away mid-session is its own business, not the sandbox's.
  server.on("error", () => {});
  const closeSmtp = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      // Held replies and pooled sessions would keep close() waiting for its grace period.
      for (const connection of server.connections) connection._socket.destroy();
    });

  const app = new Hono();
  const badRequest = (c: Context, error: string) => c.json({ error }, 400);
  app.get("/sandbox/messages", (c) => {
    const to = c.req.query("to")?.toLowerCase();
    return c.json({ data: messages.filter((m) => to === undefined || m.to.some((r) => r.toLowerCase() === to)) });
  });
  app.delete("/sandbox/messages", (c) => {
    forgetMessages();
    return c.body(null, 204);
  });
  app.post("/sandbox/faults", async (c) => {
    const parsed = v.safeParse(SmtpSandboxFault, await c.req.json().catch(() => undefined));
    if (!parsed.success) return badRequest(c, parsed.issues.map((i) => i.message).join("; "));
    faults.add(parsed.output);
    return c.body(null, 204);
  });
  app.delete("/sandbox/faults", (c) => {
    faults.clear();
    return c.body(null, 204);
  });

  const served = await serveApp(app, {
    host,
    ...(options.httpPort === undefined ? {} : { port: options.httpPort }),
  }).catch(async (error: unknown) => {
    await closeSmtp();
    throw error;
  });
  const credentials = `${encodeURIComponent(options.user)}:${encodeURIComponent(options.password)}`;
  return {
    app,
    url: `http://${host}:${served.port}`,
    port: smtpPort,
    httpPort: served.port,
    smtpUrl: `smtp://${credentials}@${host}:${smtpPort}`,
    messages: () => [...messages],
    reset: () => {
      forgetMessages();
      faults.clear();
    },
    fault: addFault,
    holding: () => holding,
    close: async () => {
      await Promise.all([served.close(), closeSmtp()]);
    },
  };
}
