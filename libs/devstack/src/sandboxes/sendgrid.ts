import {
  createHash,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  timingSafeEqual,
} from "node:crypto";
import { type Server, STATUS_CODES } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { serve } from "@hono/node-server";
import {
  type MailAddress,
  type MailContent,
  parseMailSend,
  SENDGRID_SIGNATURE_HEADER,
  SENDGRID_TIMESTAMP_HEADER,
  type SendgridErrorDetail,
  signSendgridEvents,
} from "@notify/providers";
import { type Context, Hono, type MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import * as v from "valibot";
import { createCallbackPoster, postStatus } from "./callbacks.js";
import { FaultSpan, faultQueue } from "./faults.js";
import { openJournal } from "./journal.js";
import { keepConnections } from "./serve.js";

/** One accepted personalization, as SendGrid would deliver it. */
export interface SandboxMail {
  /** The request's X-Message-Id; shared by every personalization of one request, as at SendGrid. */
  message_id: string;
  to: MailAddress[];
  from: MailAddress;
  subject: string;
  content: MailContent[];
  /** Top-level custom_args overlaid by the personalization's own. */
  custom_args: Record<string, string>;
  categories: string[];
  headers: Record<string, string>;
  received_at: string;
}

/**
 * What the next matching sends meet instead of SendGrid's normal answer. `status` answers with
 * a SendGrid-shaped error; `delay_ms` alone holds the request, then answers normally; `event`
 * accepts the mail but reports it bounced (hard), blocked (a soft bounce), dropped or deferred
 * through the Event Webhook instead of delivered.
 */
export const SandboxFault = v.pipe(
  v.object({
    status: v.optional(v.pipe(v.number(), v.integer(), v.minValue(400), v.maxValue(599))),
    retry_after_seconds: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))),
    delay_ms: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))),
    ...FaultSpan,
    /** Only sends with this recipient (case-insensitive). */
    match_to: v.optional(v.pipe(v.string(), v.email())),
    event: v.optional(v.picklist(["bounce", "blocked", "dropped", "deferred"])),
  }),
  v.check(
    (f) => f.status !== undefined || f.delay_ms !== undefined || f.event !== undefined,
    "a fault needs a status, a delay_ms or an event",
  ),
);
export type SandboxFault = v.InferOutput<typeof SandboxFault>;

export interface SendgridSandboxOptions {
  /** When set, requests must carry exactly this key, as SendGrid checks its keys. */
  apiKey?: string;
  /** Where to post signed Event Webhook batches (apps/receipts' /webhooks/sendgrid). */
  eventWebhookUrl?: string;
  /** The EC P-256 key events are signed with; a fresh one when unset. */
  webhookPrivateKey?: KeyObject;
  /**
   * A JSON Lines file (created 0600 with its folder) that makes the sandbox durable: accepted
   * mail is written to it before the answer and read back at start, and each request's events
   * are posted until the receiver answers 2xx, across restarts. In memory when unset.
   */
  journal?: string;
}

/**
 * The journal's lines. `mail`: one accepted request, its personalizations and the events
 * planned for them (their sg_event_ids are reused on every re-post); `acked`: that request's
 * events were answered 2xx; `clear`: the mail before it was forgotten (reset, DELETE).
 */
export type SendgridJournalEntry =
  | { type: "mail"; message_id: string; mails: SandboxMail[]; events: SendgridEvent[] }
  | { type: "acked"; message_id: string }
  | { type: "clear" };

/** One Event Webhook post the sandbox made, and what the receiver answered (0: unreachable). */
export interface SandboxEventPost {
  events: SendgridEvent[];
  answer: number;
}

/** The fields of SendGrid's events the sandbox produces; custom_args sit at the top level. */
export interface SendgridEvent {
  email: string;
  timestamp: number;
  event: string;
  sg_event_id: string;
  /** Left out of an event about an address alone, as of SendGrid's asynchronous bounces. */
  sg_message_id?: string;
  category: string[];
  [field: string]: unknown;
}

/** A receipt to report for one accepted mail, over POST /sandbox/events. */
export const SandboxEventRequest = v.object({
  message_id: v.pipe(v.string(), v.minLength(1)),
  event: v.picklist(["processed", "delivered", "bounce", "blocked", "dropped", "deferred", "open", "click"]),
  reason: v.optional(v.string()),
});
export type SandboxEventRequest = v.InferOutput<typeof SandboxEventRequest>;

/**
 * An event about an address rather than a send, over POST /sandbox/address-events: what
 * SendGrid reports for an address its suppression lists and receipts care about. `type` is a
 * bounce's (`bounce`: hard, the default; `blocked`: a soft bounce); `reason` a bounce's or a
 * drop's (a drop's default: "Bounced Address"). With `message_id`, the event names that send;
 * without, it names none (as SendGrid's asynchronous bounces do).
 */
export const SandboxAddressEventRequest = v.object({
  email: v.pipe(v.string(), v.email()),
  event: v.picklist(["bounce", "dropped", "spamreport", "unsubscribe", "group_unsubscribe"]),
  type: v.optional(v.picklist(["bounce", "blocked"])),
  reason: v.optional(v.pipe(v.string(), v.maxLength(1000))),
  message_id: v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(200))),
  notification_id: v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(200))),
});
export type SandboxAddressEventRequest = v.InferOutput<typeof SandboxAddressEventRequest>;

export interface SendgridSandbox {
  /** Serves `/v3/mail/send` plus the `/sandbox/*` control routes. */
  readonly app: Hono;
  /** The Event Webhook verification key, as SendGrid shows it: base64 DER (SPKI). */
  readonly webhookPublicKey: string;
  messages(): SandboxMail[];
  /** Every Event Webhook post made so far. */
  eventPosts(): SandboxEventPost[];
  /** Posts events for accepted mail, as SendGrid would; resolves once the receiver answered. */
  report(request: SandboxEventRequest): Promise<SandboxEventPost | undefined>;
  /**
   * Posts one signed event about an address (a bounce, drop, spam report or unsubscribe),
   * sent or not; undefined when no Event Webhook URL is set.
   */
  reportAddress(request: SandboxAddressEventRequest): Promise<SandboxEventPost | undefined>;
  /**
   * Resolves once every event scheduled so far has been posted (or given up on). With a
   * journal, nothing is given up on: once every request's events were answered 2xx, or stop().
   */
  settled(): Promise<void>;
  /** Forgets accepted mail (durably, with a journal) and clears every fault. */
  reset(): void;
  fault(fault: SandboxFault): void;
  /** Sends a `delay_ms` fault is holding right now: they have reached the sandbox, unanswered. */
  holding(): number;
  /**
   * Ends the retries of unacknowledged events (the journal has them for the next start) and
   * waits for posts under way. Without a journal, posts under way are left to finish.
   */
  stop(): Promise<void>;
}

export interface StartSendgridSandboxOptions extends SendgridSandboxOptions {
  /** 0 (the default) picks a free port. */
  port?: number;
  /** Loopback by default: the sandbox accepts any mail and has no auth on its control routes. */
  host?: string;
}

export interface RunningSendgridSandbox extends SendgridSandbox {
  /** Base URL for the SendGrid client, e.g. http://127.0.0.1:54321 */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

// How long events gather before a post, and at most how many one post carries (SendGrid's own
// batches are up to 768 KB, about 2 000 of the sandbox's events; smaller here, to stay far
// below any receiver's body limit).
const BATCH_MS = 100;
const BATCH_EVENTS = 500;

// SendGrid's documented limit for a whole Mail Send request.
const MAX_BODY_BYTES = 30 * 1024 * 1024;

// SendGrid's wording for the statuses clients branch on; others fall back to the HTTP reason.
const ERROR_MESSAGES: Record<number, string> = {
  401: "The provided authorization grant is invalid, expired, or revoked",
  403: "access forbidden",
  413: "The JSON payload you have included in your request is too large.",
  429: "too many requests",
};

const sendgridError = (status: number, errors: SendgridErrorDetail[], headers?: Record<string, string>): Response =>
  Response.json({ errors }, { status, ...(headers ? { headers } : {}) });

const statusError = (status: number, headers?: Record<string, string>): Response =>
  sendgridError(
    status,
    [{ message: ERROR_MESSAGES[status] ?? STATUS_CODES[status] ?? "error", field: null, help: null }],
    headers,
  );

// SendGrid's X-Message-Id is 22 characters of base64url.
const newMessageId = (): string => randomBytes(16).toString("base64url");

const digest = (value: string): Buffer => createHash("sha256").update(value).digest();

const BOUNCES: Record<string, Record<string, string>> = {
  bounce: {
    type: "bounce",
    status: "5.1.1",
    reason: "550 5.1.1 The email account that you tried to reach does not exist",
  },
  blocked: {
    type: "blocked",
    status: "4.7.1",
    reason: "421 4.7.1 Too many messages from this sender, try again later",
  },
  dropped: { reason: "Bounced Address" },
  deferred: { response: "451 4.3.0 Mailbox temporarily unavailable", attempt: "1" },
};

export function createSendgridSandbox(options: SendgridSandboxOptions = {}): SendgridSandbox {
  let mails: SandboxMail[] = [];
  const faults = faultQueue<SandboxFault>();
  let eventPosts: SandboxEventPost[] = [];
  const inFlight = new Set<Promise<unknown>>();
  let holding = 0;
  const journal = options.journal === undefined ? undefined : openJournal<SendgridJournalEntry>(options.journal);
  // Events posted by report() are not journaled: they answer their caller once, as before.
  const inMemory = createCallbackPoster(false);
  const durable = createCallbackPoster(true);
  // Requests of earlier runs (by X-Message-Id) whose events no receiver has acknowledged yet.
  const unacknowledged = new Map<string, SendgridEvent[]>();
  for (const entry of journal?.entries ?? []) {
    if (entry.type === "mail") {
      mails.push(...entry.mails);
      if (entry.events.length > 0) unacknowledged.set(entry.message_id, entry.events);
    } else if (entry.type === "acked") {
      unacknowledged.delete(entry.message_id);
    } else if (entry.type === "clear") {
      mails = [];
    }
  }
  const privateKey = options.webhookPrivateKey ?? generateKeyPairSync("ec", { namedCurve: "prime256v1" }).privateKey;
  const webhookPublicKey = createPublicKey(privateKey).export({ format: "der", type: "spki" }).toString("base64");

  const buildEvents = (mail: SandboxMail, kinds: string[], reason?: string): SendgridEvent[] =>
    mail.to.flatMap((to, i) =>
      kinds.map((kind) => {
        const detail = BOUNCES[kind] ?? {};
        return {
          ...mail.custom_args,
          email: to.email,
          timestamp: Math.floor(Date.now() / 1000),
          event: kind === "blocked" ? "bounce" : kind,
          ...detail,
          ...(reason === undefined ? {} : { reason }),
          sg_event_id: randomBytes(16).toString("base64url"),
          // SendGrid's message id is the X-Message-Id plus a suffix naming the relay.
          sg_message_id: `${mail.message_id}.sandbox-${i}-${randomBytes(4).toString("hex")}.0`,
          "smtp-id": `<${mail.message_id}@sandbox.sendgrid.net>`,
          category: mail.categories,
        };
      }),
    );

  /**
   * SendGrid retries failed posts for 24 h. In memory, three tries a second apart are enough
   * locally; with a journal (`messageId` set), until acknowledged, then the journal says so.
   */
  const postEvents = async (events: SendgridEvent[], messageIds?: string[]): Promise<SandboxEventPost | undefined> => {
    const url = options.eventWebhookUrl;
    if (url === undefined || events.length === 0) return undefined;
    const body = Buffer.from(JSON.stringify(events));
    const answer = await (messageIds === undefined ? inMemory : durable).post((signal) => {
      // Signed per try: a receiver may refuse stale timestamps.
      const timestamp = String(Math.floor(Date.now() / 1000));
      const headers = {
        "content-type": "application/json",
        [SENDGRID_SIGNATURE_HEADER]: signSendgridEvents(privateKey, timestamp, body),
        [SENDGRID_TIMESTAMP_HEADER]: timestamp,
      };
      return postStatus(url, { headers, body, signal });
    });
    if (answer === undefined) return undefined;
    for (const messageId of messageIds ?? []) journal?.append({ type: "acked", message_id: messageId });
    const post = { events, answer };
    eventPosts.push(post);
    return post;
  };

  const track = <T>(task: Promise<T>): Promise<T> => {
    inFlight.add(task);
    void task.finally(() => inFlight.delete(task));
    return task;
  };

  /**
   * SendGrid posts events in batches (every few seconds, or at 768 KB), never one request per
   * mail. The sandbox gathers what its sends produce for BATCH_MS, up to BATCH_EVENTS, so a
   * receiver meets batches as in production while tests still see receipts within moments.
   */
  let batch: { events: SendgridEvent[]; messageIds: string[]; flush: () => void } | undefined;
  const queueEvents = (events: SendgridEvent[], messageId: string | undefined): void => {
    if (options.eventWebhookUrl === undefined || events.length === 0) return;
    if (batch === undefined) {
      const gathering = { events: [] as SendgridEvent[], messageIds: [] as string[], flush: () => {} };
      const due = new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, BATCH_MS);
        timer.unref();
        gathering.flush = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      batch = gathering;
      // Tracked from the first event, so settled() waits for the batch to be posted.
      void track(
        due.then(() => {
          if (batch === gathering) batch = undefined;
          return postEvents(gathering.events, journal === undefined ? undefined : gathering.messageIds);
        }),
      );
    }
    batch.events.push(...events);
    if (messageId !== undefined) batch.messageIds.push(messageId);
    if (batch.events.length >= BATCH_EVENTS) {
      batch.flush();
      batch = undefined;
    }
  };

  const report = (request: SandboxEventRequest): Promise<SandboxEventPost | undefined> => {
    const { message_id, event, reason } = v.parse(SandboxEventRequest, request);
    const matching = mails.filter((m) => m.message_id === message_id);
    return track(postEvents(matching.flatMap((mail) => buildEvents(mail, [event], reason))));
  };

  const reportAddress = (request: SandboxAddressEventRequest): Promise<SandboxEventPost | undefined> => {
    const { email, event, type, reason, message_id, notification_id } = v.parse(SandboxAddressEventRequest, request);
    const detail = event === "bounce" ? BOUNCES[type ?? "bounce"] : event === "dropped" ? BOUNCES.dropped : undefined;
    const built: SendgridEvent = {
      ...(notification_id === undefined ? {} : { notification_id, channel: "email" }),
      email,
      timestamp: Math.floor(Date.now() / 1000),
      event,
      ...detail,
      ...(reason === undefined ? {} : { reason }),
      ...(event === "group_unsubscribe" ? { asm_group_id: 1 } : {}),
      sg_event_id: randomBytes(16).toString("base64url"),
      ...(message_id === undefined
        ? {}
        : {
            sg_message_id: `${message_id}.sandbox-0-${randomBytes(4).toString("hex")}.0`,
            "smtp-id": `<${message_id}@sandbox.sendgrid.net>`,
          }),
      category: [],
    };
    return track(postEvents([built]));
  };

  const addFault = (input: SandboxFault): void => faults.add(v.parse(SandboxFault, input));

  const takeFault = (recipients: string[]): SandboxFault | undefined =>
    faults.take((f) => f.match_to === undefined || recipients.includes(f.match_to.toLowerCase()));

  const authenticate: MiddlewareHandler = async (c, next) => {
    const token = /^Bearer (.+)$/.exec(c.req.header("authorization") ?? "")?.[1];
    if (token === undefined) {
      return sendgridError(401, [{ message: "authorization required", field: null, help: null }]);
    }
    if (options.apiKey !== undefined && !timingSafeEqual(digest(token), digest(options.apiKey))) {
      return statusError(401);
    }
    await next();
  };

  const send = async (c: Context): Promise<Response> => {
    let body: unknown;
    try {
      body = JSON.parse(await c.req.text());
    } catch {
      return sendgridError(400, [{ message: "Bad Request", field: null, help: null }]);
    }
    const parsed = parseMailSend(body);
    if (!parsed.ok) return sendgridError(400, parsed.errors);
    const { mail } = parsed;

    const recipients = mail.personalizations.flatMap((p) => p.to.map((a) => a.email.toLowerCase()));
    const fault = takeFault(recipients);
    // Unref'd so a request held past the end of a test never keeps the process alive.
    if (fault?.delay_ms !== undefined) {
      holding += 1;
      try {
        await sleep(fault.delay_ms, undefined, { ref: false });
      } finally {
        holding -= 1;
      }
    }
    if (fault?.status !== undefined) {
      const retryAfter = fault.retry_after_seconds;
      return statusError(fault.status, retryAfter === undefined ? undefined : { "Retry-After": String(retryAfter) });
    }

    const messageId = newMessageId();
    const receivedAt = new Date().toISOString();
    const accepted: SandboxMail[] = [];
    for (const p of mail.personalizations) {
      accepted.push({
        message_id: messageId,
        to: p.to,
        from: mail.from,
        // The validator guarantees one of the two.
        subject: p.subject || mail.subject || "",
        content: mail.content,
        custom_args: { ...mail.custom_args, ...p.custom_args },
        categories: mail.categories,
        headers: { ...mail.headers, ...p.headers },
        received_at: receivedAt,
      });
    }
    const kinds = fault?.event === undefined ? ["processed", "delivered"] : ["processed", fault.event];
    const events = options.eventWebhookUrl === undefined ? [] : accepted.flatMap((m) => buildEvents(m, kinds));
    // Written before the answer: mail the sender was told was accepted is never forgotten.
    journal?.append({ type: "mail", message_id: messageId, mails: accepted, events });
    mails.push(...accepted);
    // After the answer, as at SendGrid: events usually reach receipts before the worker records the send.
    queueEvents(events, messageId);
    return c.body(null, 202, { "X-Message-Id": messageId });
  };

  const forgetMail = (): void => {
    journal?.append({ type: "clear" });
    mails = [];
  };

  // Unacknowledged events from earlier runs: posted again with their ids, as SendGrid retries.
  for (const [messageId, events] of unacknowledged) void track(postEvents(events, [messageId]));

  const app = new Hono();
  app.post(
    "/v3/mail/send",
    authenticate,
    bodyLimit({ maxSize: MAX_BODY_BYTES, onError: () => statusError(413) }),
    send,
  );

  app.get("/sandbox/messages", (c) => {
    const params = new URL(c.req.url).searchParams;
    const to = params.get("to")?.toLowerCase();
    const args = [...params].flatMap(([key, value]) =>
      key.startsWith("custom_arg.") ? [[key.slice("custom_arg.".length), value] as const] : [],
    );
    const data = mails.filter(
      (m) =>
        (to === undefined || m.to.some((a) => a.email.toLowerCase() === to)) &&
        args.every(([key, value]) => m.custom_args[key] === value),
    );
    return c.json({ data });
  });
  app.delete("/sandbox/messages", (c) => {
    forgetMail();
    return c.body(null, 204);
  });

  app.post("/sandbox/faults", async (c) => {
    const parsed = v.safeParse(SandboxFault, await c.req.json().catch(() => undefined));
    if (!parsed.success) {
      return sendgridError(
        400,
        parsed.issues.map((issue) => ({ message: issue.message, field: v.getDotPath(issue), help: null })),
      );
    }
    addFault(parsed.output);
    return c.body(null, 204);
  });
  app.delete("/sandbox/faults", (c) => {
    faults.clear();
    return c.body(null, 204);
  });

  app.get("/sandbox/events", (c) => c.json({ data: eventPosts }));
  app.post("/sandbox/address-events", async (c) => {
    const parsed = v.safeParse(SandboxAddressEventRequest, await c.req.json().catch(() => undefined));
    if (!parsed.success) {
      return sendgridError(
        400,
        parsed.issues.map((issue) => ({ message: issue.message, field: v.getDotPath(issue), help: null })),
      );
    }
    const post = await reportAddress(parsed.output);
    if (post === undefined) {
      return sendgridError(409, [{ message: "no Event Webhook URL is configured", field: null, help: null }]);
    }
    return c.json(post);
  });
  app.post("/sandbox/events", async (c) => {
    const parsed = v.safeParse(SandboxEventRequest, await c.req.json().catch(() => undefined));
    if (!parsed.success) {
      return sendgridError(
        400,
        parsed.issues.map((issue) => ({ message: issue.message, field: v.getDotPath(issue), help: null })),
      );
    }
    const post = await report(parsed.output);
    if (post === undefined) return statusError(404);
    return c.json(post);
  });

  return {
    app,
    webhookPublicKey,
    messages: () => [...mails],
    eventPosts: () => [...eventPosts],
    report,
    reportAddress,
    settled: async () => {
      while (inFlight.size > 0) await Promise.all([...inFlight]);
    },
    reset: () => {
      forgetMail();
      faults.clear();
      eventPosts = [];
    },
    fault: addFault,
    holding: () => holding,
    stop: async () => {
      if (journal === undefined) return;
      durable.stop();
      while (inFlight.size > 0) await Promise.all([...inFlight]);
    },
  };
}

/** Serves a sandbox over real HTTP, so the real SendGrid client can talk to it. */
export async function startSendgridSandbox(options: StartSendgridSandboxOptions = {}): Promise<RunningSendgridSandbox> {
  const sandbox = createSendgridSandbox({
    ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
    ...(options.eventWebhookUrl === undefined ? {} : { eventWebhookUrl: options.eventWebhookUrl }),
    ...(options.webhookPrivateKey === undefined ? {} : { webhookPrivateKey: options.webhookPrivateKey }),
    ...(options.journal === undefined ? {} : { journal: options.journal }),
  });
  const host = options.host ?? "127.0.0.1";
  const { server, port } = await new Promise<{ server: ReturnType<typeof serve>; port: number }>((resolve, reject) => {
    const server = serve({ fetch: sandbox.app.fetch, port: options.port ?? 0, hostname: host }, (info) =>
      resolve({ server, port: info.port }),
    );
    server.once("error", reject);
  }).catch(async (error: unknown) => {
    // A journal's re-posts have started: they must not outlive a sandbox that never listened.
    await sandbox.stop();
    throw error;
  });
  keepConnections(server as Server);
  return {
    ...sandbox,
    url: `http://${host}:${port}`,
    port,
    close: async () => {
      await new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        // Held (delayed) requests would otherwise keep close() waiting for their sockets.
        if ("closeAllConnections" in server) server.closeAllConnections();
      });
      await sandbox.stop();
    },
  };
}
