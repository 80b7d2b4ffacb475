import { createDecipheriv, createECDH, createPublicKey, hkdfSync, randomBytes, randomUUID, verify } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { PushSubscription } from "@notify/providers";
import { type Context, Hono } from "hono";
import * as v from "valibot";
import { createSandboxTls, type SandboxTls } from "./certificates.js";
import { FaultSpan, faultQueue } from "./faults.js";
import { openJournal } from "./journal.js";
import { serveApp } from "./serve.js";

/**
 * A P-256 private key as the journal keeps it: its 32 bytes in base64url (43 characters).
 * Node's ECDH hands the key back without its leading zero bytes (one key in 256 has one), so it
 * is padded to its full length first.
 */
export const privateKeyText = (ecdh: { getPrivateKey(): Buffer }): string => {
  const key = ecdh.getPrivateKey();
  return Buffer.concat([Buffer.alloc(Math.max(0, 32 - key.length)), key]).toString("base64url");
};

/** One push message the sandbox accepted, decrypted as the browser would. */
export interface PushSandboxMessage {
  message_id: string;
  subscription_id: string;
  /** The decrypted payload (UTF-8). */
  payload: string;
  ttl: number;
  urgency: string;
  topic: string | null;
  /** The verified VAPID claims. */
  vapid: { aud: string; sub: string | null; exp: number; public_key: string };
  received_at: string;
}

/**
 * What the next matching pushes meet: `status` answers with that status (404/410 a gone
 * subscription, 413, 429 with `retry_after_seconds`, 5xx); `delay_ms` holds the request first.
 */
export const PushSandboxFault = v.pipe(
  v.object({
    status: v.optional(v.pipe(v.number(), v.integer(), v.minValue(400), v.maxValue(599))),
    retry_after_seconds: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))),
    delay_ms: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))),
    ...FaultSpan,
    /** Only pushes to this subscription id. */
    match_subscription: v.optional(v.string()),
  }),
  v.check((f) => f.status !== undefined || f.delay_ms !== undefined, "a fault needs a status or a delay_ms"),
);
export type PushSandboxFault = v.InferOutput<typeof PushSandboxFault>;

export interface PushSandboxOptions {
  /** When set, only pushes signed with this VAPID public key (base64url) are accepted. */
  vapidPublicKey?: string;
  /** The server certificate and its CA; a fresh pair when unset. */
  tls?: SandboxTls;
  /**
   * A JSON Lines file (created 0600 with its folder) that makes the sandbox durable: accepted
   * pushes are written to it before the answer, and subscriptions (with their private keys)
   * when made or removed; all are read back at start, so `${url}/push/${id}` endpoints keep
   * working after a restart on the same port (and TLS material). In memory when unset.
   */
  journal?: string;
}

/**
 * The journal's lines. `subscribe`: a subscription and the browser's secrets, base64url (the
 * P-256 private key, the auth secret); `unsubscribe`: it was removed; `message`: one accepted
 * push; `clear`: the messages before it were forgotten (reset, DELETE).
 */
export type PushJournalEntry =
  | { type: "subscribe"; id: string; private_key: string; auth: string }
  | { type: "unsubscribe"; id: string }
  | { type: "message"; message: PushSandboxMessage }
  | { type: "clear" };

export interface RunningPushSandbox {
  /** Origin of the push service, e.g. https://127.0.0.1:54321 */
  readonly url: string;
  readonly port: number;
  /** The CA (PEM) a sender must trust to reach the sandbox. */
  readonly ca: string;
  /** A browser's subscription: the sandbox keeps its private keys to decrypt what it receives. */
  subscribe(): PushSubscription & { id: string };
  /** Forget a subscription: its pushes get 410 Gone, as when a user revokes permission. */
  unsubscribe(id: string): void;
  messages(): PushSandboxMessage[];
  fault(fault: PushSandboxFault): void;
  /** Forgets messages (durably, with a journal) and clears every fault; subscriptions stay. */
  reset(): void;
  close(): Promise<void>;
}

interface Subscriber {
  ecdh: ReturnType<typeof createECDH>;
  publicKey: Buffer;
  auth: Buffer;
}

// RFC 8188: a 4096-byte record; RFC 8030: bigger payloads are 413.
const MAX_BODY_BYTES = 4096;
const TOPIC = /^[A-Za-z0-9_-]{1,32}$/;
const URGENCIES = ["very-low", "low", "normal", "high"];

/** RFC 8291 + RFC 8188: one aes128gcm record, decrypted with the subscriber's keys. */
function decrypt(body: Buffer, subscriber: Subscriber): string {
  const salt = body.subarray(0, 16);
  const idLength = body.readUInt8(20);
  const senderPublicKey = body.subarray(21, 21 + idLength);
  const record = body.subarray(21 + idLength);
  const secret = subscriber.ecdh.computeSecret(senderPublicKey);
  const info = Buffer.concat([Buffer.from("WebPush: info\0"), subscriber.publicKey, senderPublicKey]);
  const ikm = Buffer.from(hkdfSync("sha256", secret, subscriber.auth, info, 32));
  const key = Buffer.from(hkdfSync("sha256", ikm, salt, Buffer.from("Content-Encoding: aes128gcm\0"), 16));
  const nonce = Buffer.from(hkdfSync("sha256", ikm, salt, Buffer.from("Content-Encoding: nonce\0"), 12));
  const decipher = createDecipheriv("aes-128-gcm", key, nonce);
  decipher.setAuthTag(record.subarray(record.length - 16));
  const padded = Buffer.concat([decipher.update(record.subarray(0, record.length - 16)), decipher.final()]);
  // The last record ends with the delimiter 0x02, then zero padding.
  let end = padded.length - 1;
  while (end >= 0 && padded[end] === 0) end--;
  if (padded[end] !== 2) throw new Error("no last-record delimiter");
  return padded.subarray(0, end).toString("utf8");
}

/** RFC 8292: `vapid t=<JWT>, k=<public key>`; ES256, aud the push service's origin, exp within 24 h. */
function verifyVapid(
  header: string | undefined,
  origin: string,
  expectedKey: string | undefined,
): PushSandboxMessage["vapid"] | string {
  const match = /^vapid\s+t=([^,\s]+),\s*k=([A-Za-z0-9_-]+)$/.exec(header ?? "");
  if (!match?.[1] || !match[2]) return "missing or malformed vapid Authorization";
  const [token, publicKey] = [match[1], match[2]];
  if (expectedKey !== undefined && publicKey !== expectedKey) return "unknown VAPID key";
  const [head, claims, signature] = token.split(".");
  if (!head || !claims || !signature) return "malformed JWT";
  const point = Buffer.from(publicKey, "base64url");
  if (point.length !== 65) return "VAPID key is not a P-256 point";
  const key = createPublicKey({
    key: {
      kty: "EC",
      crv: "P-256",
      x: point.subarray(1, 33).toString("base64url"),
      y: point.subarray(33).toString("base64url"),
    },
    format: "jwk",
  });
  const valid = verify(
    "sha256",
    Buffer.from(`${head}.${claims}`),
    { key, dsaEncoding: "ieee-p1363" },
    Buffer.from(signature, "base64url"),
  );
  if (!valid) return "bad VAPID signature";
  const body = JSON.parse(Buffer.from(claims, "base64url").toString()) as { aud?: string; exp?: number; sub?: string };
  if (body.aud !== origin) return `aud ${body.aud} is not ${origin}`;
  const now = Math.floor(Date.now() / 1000);
  if (typeof body.exp !== "number" || body.exp <= now || body.exp > now + 24 * 3600) return "exp not within 24 h";
  return { aud: body.aud, sub: body.sub ?? null, exp: body.exp, public_key: publicKey };
}

/** A Web Push service over HTTPS with a self-signed CA, for tests and the embedded stack. */
export async function startPushSandbox(
  options: PushSandboxOptions & { port?: number; host?: string } = {},
): Promise<RunningPushSandbox> {
  const tls = options.tls ?? createSandboxTls();
  const host = options.host ?? "127.0.0.1";
  const subscribers = new Map<string, Subscriber>();
  let messages: PushSandboxMessage[] = [];
  const faults = faultQueue<PushSandboxFault>();
  let origin = "";
  const journal = options.journal === undefined ? undefined : openJournal<PushJournalEntry>(options.journal);
  for (const entry of journal?.entries ?? []) {
    if (entry.type === "subscribe") {
      const ecdh = createECDH("prime256v1");
      ecdh.setPrivateKey(Buffer.from(entry.private_key, "base64url"));
      subscribers.set(entry.id, { ecdh, publicKey: ecdh.getPublicKey(), auth: Buffer.from(entry.auth, "base64url") });
    } else if (entry.type === "unsubscribe") {
      subscribers.delete(entry.id);
    } else if (entry.type === "message") {
      messages.push(entry.message);
    } else if (entry.type === "clear") {
      messages = [];
    }
  }

  const addFault = (input: PushSandboxFault): void => faults.add(v.parse(PushSandboxFault, input));
  const takeFault = (id: string): PushSandboxFault | undefined =>
    faults.take((f) => f.match_subscription === undefined || f.match_subscription === id);

  const problem = (c: Context, status: number, reason: string, headers: Record<string, string> = {}) =>
    c.json({ code: status, errno: status, error: reason }, status as 400, headers);

  const push = async (c: Context): Promise<Response> => {
    const id = c.req.param("id") ?? "";
    const fault = takeFault(id);
    if (fault?.delay_ms !== undefined) await sleep(fault.delay_ms, undefined, { ref: false });
    if (fault?.status !== undefined) {
      const retryAfter = fault.retry_after_seconds;
      return problem(
        c,
        fault.status,
        "sandbox fault",
        retryAfter === undefined ? {} : { "Retry-After": String(retryAfter) },
      );
    }
    const subscriber = subscribers.get(id);
    if (subscriber === undefined) return problem(c, 410, "subscription gone");
    const vapid = verifyVapid(c.req.header("authorization"), origin, options.vapidPublicKey);
    if (typeof vapid === "string") return problem(c, 401, vapid);
    const ttl = c.req.header("ttl");
    if (ttl === undefined || !/^\d+$/.test(ttl)) return problem(c, 400, "TTL header required");
    const urgency = c.req.header("urgency") ?? "normal";
    if (!URGENCIES.includes(urgency)) return problem(c, 400, "invalid Urgency");
    const topic = c.req.header("topic") ?? null;
    if (topic !== null && !TOPIC.test(topic)) return problem(c, 400, "invalid Topic");
    if (c.req.header("content-encoding") !== "aes128gcm") return problem(c, 415, "Content-Encoding must be aes128gcm");
    const body = Buffer.from(await c.req.arrayBuffer());
    if (body.length > MAX_BODY_BYTES) return problem(c, 413, "payload too large");
    let payload: string;
    try {
      payload = decrypt(body, subscriber);
    } catch {
      return problem(c, 400, "payload does not decrypt");
    }
    const message: PushSandboxMessage = {
      message_id: randomUUID(),
      subscription_id: id,
      payload,
      ttl: Number(ttl),
      urgency,
      topic,
      vapid,
      received_at: new Date().toISOString(),
    };
    // Written before the answer: a push the sender was told was accepted is never forgotten.
    journal?.append({ type: "message", message });
    messages.push(message);
    return c.body(null, 201, { Location: `${origin}/message/${message.message_id}`, TTL: ttl });
  };

  const subscribe = (): PushSubscription & { id: string } => {
    const ecdh = createECDH("prime256v1");
    const publicKey = ecdh.generateKeys();
    const auth = randomBytes(16);
    const id = randomUUID();
    journal?.append({
      type: "subscribe",
      id,
      private_key: privateKeyText(ecdh),
      auth: auth.toString("base64url"),
    });
    subscribers.set(id, { ecdh, publicKey, auth });
    return {
      id,
      endpoint: `${origin}/push/${id}`,
      keys: { p256dh: publicKey.toString("base64url"), auth: auth.toString("base64url") },
    };
  };

  const unsubscribe = (id: string): void => {
    if (subscribers.has(id)) journal?.append({ type: "unsubscribe", id });
    subscribers.delete(id);
  };

  const forgetMessages = (): void => {
    journal?.append({ type: "clear" });
    messages = [];
  };

  const app = new Hono();
  app.post("/push/:id", push);
  app.post("/sandbox/subscriptions", (c) => c.json(subscribe(), 201));
  app.delete("/sandbox/subscriptions/:id", (c) => {
    unsubscribe(c.req.param("id"));
    return c.body(null, 204);
  });
  app.get("/sandbox/messages", (c) => {
    const subscription = c.req.query("subscription_id");
    return c.json({ data: messages.filter((m) => subscription === undefined || m.subscription_id === subscription) });
  });
  app.delete("/sandbox/messages", (c) => {
    forgetMessages();
    return c.body(null, 204);
  });
  app.get("/sandbox/ca.pem", (c) => c.body(tls.ca, 200, { "content-type": "application/x-pem-file" }));
  app.post("/sandbox/faults", async (c) => {
    const parsed = v.safeParse(PushSandboxFault, await c.req.json().catch(() => undefined));
    if (!parsed.success) return problem(c, 400, parsed.issues.map((i) => i.message).join("; "));
    addFault(parsed.output);
    return c.body(null, 204);
  });
  app.delete("/sandbox/faults", (c) => {
    faults.clear();
    return c.body(null, 204);
  });

  const served = await serveApp(app, {
    host,
    https: { key: tls.key, cert: tls.cert },
    ...(options.port === undefined ? {} : { port: options.port }),
  });
  origin = `https://${host.includes(":") ? `[${host}]` : host}:${served.port}`;
  return {
    url: origin,
    port: served.port,
    ca: tls.ca,
    subscribe,
    unsubscribe,
    messages: () => [...messages],
    fault: addFault,
    reset: () => {
      forgetMessages();
      faults.clear();
    },
    close: served.close,
  };
}
