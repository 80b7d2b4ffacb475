import { createHash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { Agent, request } from "node:https";
import { urlToHttpOptions } from "node:url";
import { type ProviderAnswer, secondsLeft, TIMED_OUT } from "@notify/core";
import webpush, { type RequestDetails } from "web-push";
import type { OutboundMessage, Provider } from "../provider.js";
import { transportFailure } from "../transport.js";
import { type EndpointPolicy, endpointRefusal, guardedLookup } from "./ssrf.js";

export interface VapidKeys {
  /** A contact for push services: mailto: or https: URL. */
  subject: string;
  /** base64url, uncompressed P-256 point (web-push generateVAPIDKeys()). */
  publicKey: string;
  privateKey: string;
}

export interface WebPushConfig extends EndpointPolicy {
  vapid: VapidKeys;
  /** Extra CA certificates (PEM) to trust: the local push sandbox's self-signed CA. */
  ca?: string;
  /** How long a push service keeps an undelivered message, per priority. */
  ttlSeconds: { transactional: number; promotional: number };
  /** The send's deadline: the request is aborted then, whatever the push service is doing. */
  timeoutMs: number;
  /**
   * Called when the push service says a subscription is gone (404/410), before the send
   * returns: remove it from the user's device tokens so nothing is sent to it again. A failure
   * here does not change the send's result (addressGone tells the caller too).
   */
  onSubscriptionGone?: (endpoint: string) => Promise<void>;
}

export interface PushSubscription {
  endpoint: string;
  keys: { p256dh: string; auth: string };
}

/** What the service worker receives: the rendered message and what it is about. */
export interface PushPayload {
  notification_id: string;
  title: string | null;
  body: string;
  category: string;
}

// RFC 8291: one aes128gcm record of 4096 bytes holds at most 3993 bytes of plaintext.
const MAX_PAYLOAD_BYTES = 3993;

function parseSubscription(to: string): PushSubscription | undefined {
  try {
    const value = JSON.parse(to) as Partial<PushSubscription>;
    if (
      typeof value.endpoint === "string" &&
      typeof value.keys?.p256dh === "string" &&
      typeof value.keys.auth === "string"
    ) {
      return { endpoint: value.endpoint, keys: { p256dh: value.keys.p256dh, auth: value.keys.auth } };
    }
  } catch {}
  return undefined;
}

/**
 * A newer promotional message of the same category replaces an undelivered one (a phone that was
 * off all night gets the latest offer, not ten); Topic is at most 32 base64url characters.
 */
export const pushTopic = (category: string): string => {
  const plain = category.replace(/[^A-Za-z0-9_-]/g, "-");
  return plain.length <= 32 ? plain : createHash("sha256").update(category).digest("base64url").slice(0, 32);
};

/**
 * Most of a push service's answer body that is read. It answers with a status and at most a
 * short text (RFC 8030: 201 and a Location), which only a refusal's reason quotes; past this the
 * connection is closed, so an endpoint answering without end costs a few KiB, not the heap.
 */
export const MAX_PUSH_ANSWER_BYTES = 4096;

/** What the push service answered: its status, headers, and the first MAX_PUSH_ANSWER_BYTES of its body. */
interface PushAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * Sends the built request and reads the answer's status, headers and at most
 * MAX_PUSH_ANSWER_BYTES of its body. The request is aborted `timeoutMs` after it starts (an
 * AbortSignal: the socket is destroyed, nothing goes on reading in the background): with no
 * answer by then it is TIMED_OUT; with a status, the status stands and the body is what came.
 * A body cut short (the cap, the deadline, a reset) changes nothing either: the status decides.
 */
function exchange(details: RequestDetails, agent: Agent, timeoutMs: number): Promise<PushAnswer | typeof TIMED_OUT> {
  return new Promise((resolve, reject) => {
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), timeoutMs);
    let head: Omit<PushAnswer, "body"> | undefined;
    const chunks: Buffer[] = [];
    let kept = 0;
    let settled = false;
    const settle = (outcome: PushAnswer | typeof TIMED_OUT | Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (outcome instanceof Error) reject(outcome);
      else resolve(outcome);
    };
    const answered = () => (head === undefined ? TIMED_OUT : { ...head, body: Buffer.concat(chunks).toString("utf8") });
    const sent = request(
      {
        ...urlToHttpOptions(new URL(details.endpoint)),
        method: details.method,
        headers: details.headers,
        agent,
        signal: deadline.signal,
      },
      (response) => {
        head = { status: response.statusCode ?? 0, headers: response.headers };
        response.on("data", (chunk: Buffer) => {
          const room = MAX_PUSH_ANSWER_BYTES - kept;
          chunks.push(chunk.subarray(0, room));
          kept += Math.min(room, chunk.length);
          if (kept >= MAX_PUSH_ANSWER_BYTES) {
            settle(answered());
            response.destroy();
          }
        });
        response.on("end", () => settle(answered()));
        // Cut short, by the cap, the deadline or the network: what came is the answer.
        response.on("close", () => settle(answered()));
        response.on("error", () => settle(answered()));
      },
    );
    sent.on("error", (error) => settle(head !== undefined ? answered() : deadline.signal.aborted ? TIMED_OUT : error));
    sent.end(details.body ?? undefined);
  });
}

const retryAfterMs = (value: string | undefined): { retryAfterMs?: number } => {
  if (value === undefined) return {};
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return { retryAfterMs: seconds * 1000 };
  const date = Date.parse(value);
  return Number.isFinite(date) ? { retryAfterMs: Math.max(0, date - Date.now()) } : {};
};

/** 404/410 gone (remove it), 413 too large and other 4xx final; 429 and 5xx retry. */
function classify(answer: PushAnswer): ProviderAnswer {
  const { status } = answer;
  if (status === 404 || status === 410) {
    return { outcome: "permanent", reason: `webpush ${status}: subscription gone`, status, addressGone: true };
  }
  if (status === 408 || status === 429 || status >= 500) {
    return {
      outcome: "transient",
      reason: `webpush ${status}`,
      status,
      ...retryAfterMs(answer.headers["retry-after"]),
    };
  }
  if (status === 413) return { outcome: "permanent", reason: "webpush 413: payload too large", status };
  if (status === 401 || status === 403) {
    return { outcome: "permanent", reason: `webpush ${status}: VAPID credentials refused`, status };
  }
  return { outcome: "permanent", reason: `webpush ${status}: ${answer.body.slice(0, 200) || "refused"}`, status };
}

export function createWebPushProvider(config: WebPushConfig): Provider {
  const policy: EndpointPolicy = {
    allowedHosts: config.allowedHosts,
    allowPrivateNetworks: config.allowPrivateNetworks,
  };
  const agent = new Agent({
    keepAlive: true,
    lookup: guardedLookup(policy) as never,
    ...(config.ca === undefined ? {} : { ca: config.ca }),
  });
  const timedOut: ProviderAnswer = { outcome: "transient", reason: `webpush timed out after ${config.timeoutMs} ms` };

  const send = async (message: OutboundMessage): Promise<ProviderAnswer> => {
    const subscription = parseSubscription(message.to);
    if (subscription === undefined)
      return { outcome: "permanent", reason: "webpush: not a push subscription", addressGone: true };
    const refusal = endpointRefusal(subscription.endpoint, policy);
    // Not addressGone: the allowlist is configuration, and a fixed one must find the subscription still there.
    if (refusal !== undefined) return { outcome: "permanent", reason: `webpush: ${refusal}` };
    const payload: PushPayload = {
      notification_id: message.notificationId,
      title: message.subject,
      body: message.body,
      category: message.category,
    };
    const body = JSON.stringify(payload);
    if (Buffer.byteLength(body) > MAX_PAYLOAD_BYTES) {
      return { outcome: "permanent", reason: `webpush: payload over ${MAX_PAYLOAD_BYTES} bytes` };
    }
    const promotional = message.priority === "promotional";
    const { ttl, urgency } = pushLifetime(message, config.ttlSeconds);
    let details: RequestDetails;
    try {
      // web-push encrypts and signs; the request itself is this provider's (exchange).
      details = webpush.generateRequestDetails(subscription, body, {
        vapidDetails: config.vapid,
        TTL: ttl,
        urgency,
        ...(promotional ? { topic: pushTopic(message.category) } : {}),
        contentEncoding: "aes128gcm",
      });
    } catch (error) {
      // Building the request failed (bad keys, a bad subscription): the same call fails again.
      return { outcome: "permanent", reason: `webpush request not built: ${String(error)}` };
    }
    let answer: PushAnswer | typeof TIMED_OUT;
    try {
      answer = await exchange(details, agent, config.timeoutMs);
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code === "EPRIVATEADDR") return { outcome: "permanent", reason: `webpush: ${(error as Error).message}` };
      return transportFailure("webpush", code, (error as Error).message);
    }
    if (answer === TIMED_OUT) return timedOut;
    if (answer.status < 200 || answer.status > 299) {
      const result = classify(answer);
      if (result.outcome === "permanent" && result.addressGone) {
        await config.onSubscriptionGone?.(subscription.endpoint).catch(() => {});
      }
      return result;
    }
    // RFC 8030: the push service answers with the message's own URL; it names this send.
    const location = answer.headers.location;
    return {
      outcome: "accepted",
      providerId: typeof location === "string" && location !== "" ? location : message.notificationId,
    };
  };

  return { name: "webpush", channel: "push", send };
}

/** A VAPID key pair for a sender's config (`npx web-push generate-vapid-keys` does the same). */
export const generateVapidKeys = (): { publicKey: string; privateKey: string } => webpush.generateVAPIDKeys();

/** A deadline this close makes even a promotional push urgent: a late one is worth nothing. */
const URGENT_WITHIN_SECONDS = 3600;

/**
 * How long the push service may keep the message (RFC 8030 TTL) and how urgently it should wake
 * the device: by lane, and never past the notification's deadline, when it has one.
 */
export function pushLifetime(
  message: Pick<OutboundMessage, "priority" | "deliverBy">,
  ttlSeconds: { transactional: number; promotional: number },
  now = Date.now(),
): { ttl: number; urgency: "low" | "high" } {
  const promotional = message.priority === "promotional";
  const configured = promotional ? ttlSeconds.promotional : ttlSeconds.transactional;
  const left = secondsLeft(message.deliverBy, now);
  if (left === null) return { ttl: configured, urgency: promotional ? "low" : "high" };
  return { ttl: Math.min(configured, left), urgency: promotional && left > URGENT_WITHIN_SECONDS ? "low" : "high" };
}
