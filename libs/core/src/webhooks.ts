import { randomBytes } from "node:crypto";
import { privateHostProblem } from "./network.js";

/**
 * Outbound webhooks: the event types a client's endpoint may subscribe to, the retry schedule of
 * a post, and what one attempt leads to. No I/O: the time comes in as `now`, every random draw
 * through `random`; the dispatcher and the sender execute the decisions.
 */

/** Every event type an endpoint may ask for (`ping` is sent only by `POST …/test`). */
export const WEBHOOK_EVENT_TYPES = [
  "notification.accepted",
  "notification.completed",
  "channel.delivered",
  "channel.bounced",
  "channel.failed",
  "channel.expired",
  "channel.suppressed",
  "channel.unsettled",
  "channel.canceled",
  "fallback.taken",
  "provider.switched",
  "inbox.read",
  "broadcast.expanded",
  "broadcast.completed",
] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/**
 * What an endpoint may ask its events to carry beyond ids and outcomes: the notification's
 * template data (what its message is rendered from), and the user's address on the event's
 * channel (both email and phone for a notification's own events), as stored when the post is made.
 */
export const WEBHOOK_INCLUDES = ["notification_data", "recipient"] as const;
export type WebhookInclude = (typeof WEBHOOK_INCLUDES)[number];

/**
 * The address an event's `recipient` shows: the one its channel is sent to (none for push and
 * in-app, which are sent to devices and the inbox), or both for an event of the whole notification.
 */
export function recipientOf(
  channel: unknown,
  contacts: { email: string | null; phone: string | null },
): { email?: string | null; phone?: string | null } {
  if (channel === "email") return { email: contacts.email };
  if (channel === "sms") return { phone: contacts.phone };
  if (channel === undefined || channel === null) return { email: contacts.email, phone: contacts.phone };
  return {};
}

/** One line per type, for the API document and docs/webhooks.md. */
export const WEBHOOK_EVENT_DESCRIPTIONS: Record<WebhookEventType | "ping", string> = {
  "notification.accepted": "a notification was accepted (202) and stored",
  "notification.completed":
    "every channel of a notification has an outcome (the notification's status is completed, partially_failed, failed, suppressed or canceled); sent once",
  "channel.delivered": "a channel was delivered: its provider accepted it, or a receipt confirmed it",
  "channel.bounced": "a provider reported a bounce for a delivered channel",
  "channel.failed": "a channel failed for good: refused, retries exhausted, or its template could not render",
  "channel.expired": "a channel's deliver-by deadline passed before it was sent",
  "channel.suppressed": "a channel was not sent: an opt-out, quiet hours, the daily cap, or no address",
  "channel.unsettled": "a provider may have accepted a channel but did not say so; a receipt may still settle it",
  "channel.canceled": "a channel was canceled before it was sent (POST /api/v1/notifications/{id}/cancel); never sent",
  "fallback.taken": "a step of the notification's channel fallback chain was taken",
  "provider.switched": "a channel's send moved to another provider (email failing over)",
  "inbox.read": "the user read an in-app item",
  "broadcast.expanded": "every member of a broadcast's audience has a notification",
  "broadcast.completed":
    "every notification a broadcast expanded is completed, with the count of each outcome; sent once, for a broadcast accepted while an endpoint of its client wanted this type",
  ping: "a test event sent by POST /api/v1/webhook-endpoints/{id}/test",
};

/**
 * Seconds to wait after each failed attempt, before the next: about three days in all, then the
 * delivery is dead (the endpoint's dead letters). Ten attempts: at once, then after 5 s, 5 min,
 * 30 min, 2 h, 5 h, 10 h, 14 h, 20 h and 20 h.
 */
export const DEFAULT_WEBHOOK_RETRY_SCHEDULE_SECONDS: readonly number[] = [
  5, 300, 1800, 7200, 18_000, 36_000, 50_400, 72_000, 72_000,
];

/** A signing secret as Standard Webhooks writes it: `whsec_` and 24 random bytes, base64. */
export const newWebhookSecret = (): string => `whsec_${randomBytes(24).toString("base64")}`;

/** The id of an endpoint: `whe_` and 16 random bytes, base64url. */
export const newWebhookEndpointId = (): string => `whe_${randomBytes(16).toString("base64url")}`;

/** The webhook-id of an event: the same on every attempt, so a receiver can drop repeats. */
export const webhookMessageId = (eventId: number | string): string => `evt_${eventId}`;

/** The body posted for an event: its id, type, time, sequence and data. */
export interface WebhookEnvelope {
  id: string;
  type: string;
  timestamp: string;
  /** Grows with every event of the deployment: a later change of one channel has a larger one. */
  sequence: number;
  data: Record<string, unknown>;
}

export function webhookEnvelope(event: {
  id: number;
  type: string;
  occurredAt: Date;
  data: Record<string, unknown>;
}): WebhookEnvelope {
  return {
    id: webhookMessageId(event.id),
    type: event.type,
    timestamp: event.occurredAt.toISOString(),
    sequence: event.id,
    data: event.data,
  };
}

/** What one attempt's answer was. */
export type WebhookAnswer =
  | { ok: true; statusCode: number }
  | { ok: false; statusCode: number | null; error: string; retryAfterMs?: number };

/** What follows an attempt. */
export type WebhookDecision =
  | { kind: "delivered" }
  | { kind: "retry"; atMs: number }
  | { kind: "dead"; reason: string };

export interface WebhookAttemptInput {
  answer: WebhookAnswer;
  /** The attempt just made, from 1. */
  attempt: number;
  now: number;
  schedule: readonly number[];
  random: () => number;
}

/**
 * After attempt `attempt`: a 2xx is delivered; anything else is retried after the schedule's
 * delay for it, with ±20 % jitter so the posts of many events do not arrive together, and never
 * before the endpoint's Retry-After (capped at twice the delay); once the schedule is spent the
 * delivery is dead.
 */
export function decideWebhookAttempt(input: WebhookAttemptInput): WebhookDecision {
  const { answer } = input;
  if (answer.ok) return { kind: "delivered" };
  const delaySeconds = input.schedule[input.attempt - 1];
  if (delaySeconds === undefined) {
    return { kind: "dead", reason: `${input.attempt} attempts failed; last: ${answer.error}` };
  }
  const jittered = delaySeconds * 1000 * (0.8 + 0.4 * input.random());
  const retryAfter = Math.min(answer.retryAfterMs ?? 0, delaySeconds * 2000);
  return { kind: "retry", atMs: input.now + Math.ceil(Math.max(jittered, retryAfter)) };
}

/**
 * Whether an endpoint that has failed every attempt since `failingSince` is disabled now: after
 * `disableAfterMs` of nothing but failures.
 */
export const shouldDisableEndpoint = (failingSince: number | null, now: number, disableAfterMs: number): boolean =>
  failingSince !== null && now - failingSince >= disableAfterMs;

/**
 * Reads a retry schedule written as seconds separated by commas (`5,300,1800`): each a finite
 * number at least 0; an empty list means a single attempt.
 */
export function parseRetrySchedule(text: string): number[] {
  const trimmed = text.trim();
  if (trimmed === "") return [];
  return trimmed.split(",").map((part) => {
    const value = Number(part.trim());
    if (part.trim() === "" || !Number.isFinite(value) || value < 0) {
      throw new Error(`not a delay in seconds: ${JSON.stringify(part)}`);
    }
    return value;
  });
}

/**
 * Why a URL cannot be a webhook endpoint, or null when it can: https, no credentials in it, a
 * public host (no IP literal of a private network, no name that only means this machine or a
 * private network). With `allowPrivateNetworks` (the development stack) plain http and private
 * hosts are allowed. The sender checks every address the name resolves to again at connect time.
 */
export function webhookUrlProblem(text: string, allowPrivateNetworks: boolean): string | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return "url must be a URL";
  }
  if (url.protocol !== "https:" && !(allowPrivateNetworks && url.protocol === "http:")) {
    return allowPrivateNetworks ? "url must be http or https" : "url must be https";
  }
  if (url.username !== "" || url.password !== "") return "url must not carry credentials";
  if (url.hash !== "") return "url must not have a fragment";
  if (allowPrivateNetworks) return null;
  const problem = privateHostProblem(url.hostname);
  return problem === null ? null : `url must point at a public host: ${problem}`;
}
