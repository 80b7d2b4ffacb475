import { PassThrough, pipeline, type Readable } from "node:stream";
import { rootCertificates } from "node:tls";
import { type ProviderAnswer, TIMED_OUT, withDeadline } from "@notify/core";
import nodemailer from "nodemailer";
import type { SendMailOptions } from "nodemailer/lib/mailer";
import { htmlToText } from "../email-text.js";
import type { OutboundMessage, Provider } from "../provider.js";

export interface SmtpConfig {
  /**
   * The relay, with its credentials percent-encoded: smtp://user:pass@host:port (STARTTLS,
   * port 587 by default) or smtps://user:pass@host:port (TLS from the start, 465 by default).
   * Without credentials no AUTH is made (a relay that trusts the sender's address).
   */
  url: string;
  /** Sender address; its domain also names the Message-ID. */
  from: string;
  fromName?: string;
  /** Deadline for one send, from the call to the relay's reply to the message (pool wait included). */
  timeoutMs: number;
  /**
   * An smtp:// session must be upgraded with STARTTLS before AUTH and the message: true for a
   * real relay (credentials and mail never cross in clear), false for the local sandbox.
   */
  requireTls: boolean;
  /** PEM of an extra CA to trust, besides the public ones (a relay with a private CA). */
  ca?: string;
}

/** What nodemailer rejects with; its own error type is not exported in a usable form. */
interface SmtpError extends Error {
  /** nodemailer's class: ECONNECTION, ETIMEDOUT, EAUTH, EENVELOPE, EMESSAGE, ... */
  code?: string;
  /** The system error under it, e.g. ECONNREFUSED under ECONNECTION. */
  originalCode?: string;
  /** The relay's reply code, when a reply is what failed the send. */
  responseCode?: number;
  /** The relay's whole reply. */
  response?: string;
  /** The command the reply answered: "MAIL FROM", "RCPT TO", "DATA", "AUTH PLAIN", or "CONN". */
  command?: string;
}

const asSmtpError = (error: unknown): SmtpError =>
  error instanceof Error ? (error as SmtpError) : new Error(String(error));

/**
 * Failures nodemailer reports before a byte goes to the relay, from the message itself: sending
 * the same message again fails the same way.
 */
const NOT_BUILT = new Set(["ECONFIG", "ESTREAM", "EMAXRECIPIENTS", "EFILEACCESS", "EURLACCESS", "EREQUIRETLS"]);
const AUTH_FAILURES = new Set(["EAUTH", "ENOAUTH", "EOAUTH2"]);

/** One plain address: nodemailer would otherwise read a list ("a@x, b@y") as several recipients. */
const SINGLE_ADDRESS = /^[^\s@<>,;:"()[\]\\]+@[^\s@<>,;:"()[\]\\]+$/;

interface Relay {
  host: string;
  port: number;
  secure: boolean;
  user: string;
  password: string;
}

/** The relay of an smtp(s):// URL. Its errors never quote the URL: it holds the password. */
export function parseSmtpUrl(url: string): Relay {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error("the SMTP URL is not a URL");
  }
  const secure = parsed.protocol === "smtps:";
  if (!secure && parsed.protocol !== "smtp:") throw new Error("the SMTP URL must be smtp:// or smtps://");
  if (parsed.hostname === "") throw new Error("the SMTP URL names no host");
  return {
    // An IPv6 literal comes bracketed, as a URL writes it; sockets want it bare.
    host: parsed.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: parsed.port === "" ? (secure ? 465 : 587) : Number(parsed.port),
    secure,
    user: decodeURIComponent(parsed.username),
    password: decodeURIComponent(parsed.password),
  };
}

/**
 * Whether the relay has had the whole message: set once the last byte of the message was read
 * by the SMTP session, which only then writes the `<CRLF>.<CRLF>` that ends it. A relay cannot
 * accept a message whose end it never got (RFC 5321 drops an unfinished transaction), so a
 * failure before this is one a retry cannot duplicate, wherever the session broke.
 */
interface Progress {
  messageRead: boolean;
}

// Carried in the message options to the stream plugin below, which sees nothing else of the send.
const PROGRESS = "notifyProgress";
type TrackedOptions = SendMailOptions & { [PROGRESS]: Progress };

/** The message's bytes, passed through a stream that says when the session has read them all. */
const watchRead =
  (progress: Progress) =>
  (input: Readable): Readable => {
    const output = new PassThrough();
    output.once("end", () => {
      progress.messageRead = true;
    });
    // Errors reach the session through `output`, which pipeline destroys with them.
    pipeline(input, output, () => {});
    return output;
  };

/** A reply code refused the send: the relay holds nothing of it. */
function classifyReply(error: SmtpError, status: number): ProviderAnswer {
  const command = error.command === undefined || error.command === "CONN" ? "" : ` at ${error.command}`;
  const reply = (error.response ?? error.message).replace(/\s+/g, " ").slice(0, 200);
  const reason = `smtp ${status}${command}: ${reply}`;
  // 503 (bad sequence of commands) is the session's state, not the message: a new session may take it.
  if ((status >= 400 && status < 500) || status === 503) return { outcome: "transient", reason, status };
  return { outcome: "permanent", reason, status };
}

/**
 * Failure classes. A reply refused the send: 4xx retries, 5xx is final, either way nothing was
 * queued (`status`). Credentials refused (or none accepted) are configuration: final. Anything
 * else broke the session (refused, DNS, TLS, a drop, a timeout): `notSent` when the relay never
 * had the whole message, an unknown outcome once it had (it may have queued it, its reply lost).
 */
function classify(error: SmtpError, progress: Progress): ProviderAnswer {
  const status = error.responseCode;
  if (error.code !== undefined && AUTH_FAILURES.has(error.code)) {
    if (status !== undefined && status >= 400 && status < 500) return classifyReply(error, status);
    return {
      outcome: "permanent",
      reason: `smtp: the relay refused the credentials${status === undefined ? "" : ` (${status})`}`,
      ...(status === undefined ? {} : { status }),
    };
  }
  if (status !== undefined && status >= 400 && status < 600) return classifyReply(error, status);
  if (error.code !== undefined && NOT_BUILT.has(error.code)) {
    return { outcome: "permanent", reason: `smtp message not sent: ${error.code}: ${error.message.slice(0, 200)}` };
  }
  if (error.code === "EENVELOPE" || error.code === "EMESSAGE") {
    // No reply code: nodemailer refused it first (no recipient, over the relay's SIZE).
    return { outcome: "permanent", reason: `smtp message refused: ${error.message.slice(0, 200)}` };
  }
  const detail = [error.code, error.originalCode].filter((c) => c !== undefined).join(" ") || error.message;
  const reason = `smtp connection failed: ${detail.slice(0, 200)}`;
  // The stage, not the code, decides: nodemailer reports a drop as ECONNECTION at any stage.
  if (!progress.messageRead) return { outcome: "transient", reason, notSent: true };
  return { outcome: "transient", reason };
}

/** Every form the password could take in a reply echoed back: plain, URL-encoded, and as AUTH sends it. */
function secretForms(relay: Relay): string[] {
  if (relay.password === "") return [];
  const base64 = (text: string) => Buffer.from(text, "utf8").toString("base64");
  return [
    ...new Set([
      relay.password,
      encodeURIComponent(relay.password),
      base64(relay.password),
      base64(`\u0000${relay.user}\u0000${relay.password}`),
    ]),
  ].sort((a, b) => b.length - a.length);
}

export function createSmtpProvider(config: SmtpConfig): Provider {
  const relay = parseSmtpUrl(config.url);
  const domain = config.from.slice(config.from.lastIndexOf("@") + 1);
  const transport = nodemailer.createTransport({
    // Connections (and their TLS and AUTH) are reused across sends: a handshake per email
    // would cost more than the email.
    pool: true,
    maxConnections: 5,
    maxMessages: 100,
    host: relay.host,
    port: relay.port,
    secure: relay.secure,
    requireTLS: config.requireTls,
    ...(relay.user === "" && relay.password === "" ? {} : { auth: { user: relay.user, pass: relay.password } }),
    // Node's `ca` replaces the public roots; an extra CA must come with them.
    ...(config.ca === undefined ? {} : { tls: { ca: [...rootCertificates, config.ca] } }),
    // Setting up a session past the deadline is pointless: withDeadline() has given up by then.
    connectionTimeout: config.timeoutMs,
    greetingTimeout: config.timeoutMs,
    // A connection idle this long is closed: relays drop idle sessions themselves after a minute or so.
    idleTimeout: 30_000,
    // The body is a rendered template: it must never make nodemailer read a file or fetch a URL.
    disableFileAccess: true,
    disableUrlAccess: true,
    logger: false,
  });
  // Every failure also reaches the send it belongs to; an 'error' event nobody listened to would
  // end the process instead.
  transport.on("error", () => {});
  transport.use("stream", (mail, done) => {
    const progress = (mail.data as Partial<TrackedOptions>)[PROGRESS];
    if (progress !== undefined) mail.message.processFunc(watchRead(progress));
    done();
  });
  const from = config.fromName === undefined ? config.from : { name: config.fromName, address: config.from };
  const timedOut = `smtp timed out after ${config.timeoutMs} ms`;

  // Reasons end up in status rows and logs; a relay echoing what it was sent must not leak the password.
  const secrets = secretForms(relay);
  const redact = (result: ProviderAnswer): ProviderAnswer =>
    result.outcome === "accepted" || secrets.length === 0
      ? result
      : {
          ...result,
          reason: secrets.reduce((reason, secret) => reason.replaceAll(secret, "[redacted]"), result.reason),
        };

  const send = async (message: OutboundMessage): Promise<ProviderAnswer> => {
    if (message.subject === null) return { outcome: "permanent", reason: "an email needs a subject" };
    if (!SINGLE_ADDRESS.test(message.to)) return { outcome: "permanent", reason: "smtp: not a single email address" };
    // Derived from the notification: a resend after an unknown outcome carries the same
    // Message-ID, so the recipient's side can tell the two copies are one message.
    const messageId = `${message.notificationId}@${domain}`;
    const text = htmlToText(message.body);
    const progress: Progress = { messageRead: false };
    const abort = new AbortController();
    const options: TrackedOptions = {
      from,
      to: message.to,
      subject: message.subject,
      html: message.body,
      ...(text.length > 0 ? { text } : {}),
      messageId: `<${messageId}>`,
      headers: { ...message.headers, "X-Notification-Id": message.notificationId },
      signal: abort.signal,
      [PROGRESS]: progress,
    };
    try {
      const answer = await withDeadline(transport.sendMail(options), config.timeoutMs);
      if (answer === TIMED_OUT) {
        // Checked before the abort, which closes the session: a message not wholly read by
        // then never will be, so the relay cannot have it.
        const read = progress.messageRead;
        abort.abort();
        return read
          ? { outcome: "transient", reason: timedOut }
          : { outcome: "transient", reason: timedOut, notSent: true };
      }
      // Our Message-ID rather than the relay's queue id: it is known whatever the relay's reply
      // says (a queue id's format is the relay's own, when it gives one), it is in every copy
      // and every bounce, and it stays the same across relays and resends.
      return { outcome: "accepted", providerId: messageId };
    } catch (error) {
      return classify(asSmtpError(error), progress);
    }
  };

  return {
    name: "smtp",
    channel: "email",
    send: async (message) => redact(await send(message)),
    close: async () => transport.close(),
  };
}
