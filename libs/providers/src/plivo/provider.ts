import { createRequire } from "node:module";
import { type ProviderAnswer, secondsLeft, TIMED_OUT, withDeadline } from "@notify/core";
import type Plivo from "plivo";
import type { OutboundMessage, Provider } from "../provider.js";
import { transportFailure } from "../transport.js";

export interface PlivoConfig {
  authId: string;
  authToken: string;
  /** API origin: https://api.plivo.com, or a sandbox URL. */
  baseUrl: string;
  /** Sender: a Plivo number in E.164 or an approved alphanumeric sender id. */
  from: string;
  /**
   * Where Plivo posts delivery reports (apps/receipts' /webhooks/plivo, as Plivo reaches it).
   * Each message gets its own URL carrying its notification id. Unset: no reports.
   */
  reportUrl?: string;
  /** Deadline for one send, from the call to Plivo's answer. */
  timeoutMs: number;
}

const E164 = /^\+[1-9]\d{6,14}$/;

// plivo rejects with its own error carrying `status` for the statuses it knows (400, 401, 404,
// 5xx of its list), with a plain Error whose only trace of the status is axios's message
// "Request failed with status code N" for the others (429, 503), and with a bare stack string
// when no answer came at all.
const STATUS_IN_MESSAGE = /status code (\d{3})/;

function classify(error: unknown, timedOut: ProviderAnswer): ProviderAnswer {
  if (typeof error === "string") {
    if (/timeout|ECONNABORTED|ETIMEDOUT/.test(error)) return timedOut;
    const code = /\b((?:E[A-Z_]{3,}|ERR_[A-Z_]+|[A-Z_]*CERT[A-Z_]*))\b/.exec(error)?.[1];
    return transportFailure("plivo", code, error.split("\n")[0] ?? error);
  }
  const message = error instanceof Error ? error.message : String(error);
  const known = (error as { status?: unknown } | null)?.status;
  const status = typeof known === "number" ? known : Number(STATUS_IN_MESSAGE.exec(message)?.[1]);
  if (!Number.isInteger(status)) {
    // Only the SDK's own argument checks are left: the same message would fail again.
    return { outcome: "permanent", reason: `plivo request not built: ${message}` };
  }
  if (status === 401) return { outcome: "permanent", reason: "plivo 401: auth id or token invalid", status };
  if (status === 408 || status === 429 || status >= 500)
    return { outcome: "transient", reason: `plivo ${status}`, status };
  return { outcome: "permanent", reason: `plivo ${status}: message refused`, status };
}

const require = createRequire(import.meta.url);

export function createPlivoProvider(config: PlivoConfig): Provider {
  // Loaded with the first provider, not with this module: every worker imports the providers,
  // few send SMS, and plivo adds megabytes of memory and time at start to a process (it also
  // replaces axios's default agents when it loads).
  const plivo = require("plivo") as typeof Plivo;
  const client = new plivo.Client(config.authId, config.authToken, {
    url: `${config.baseUrl.replace(/\/+$/, "")}/v1/Account/${config.authId}`,
    timeout: config.timeoutMs,
  });
  const timedOut: ProviderAnswer = { outcome: "transient", reason: `plivo timed out after ${config.timeoutMs} ms` };

  const reportUrl = (notificationId: string): string | undefined => {
    if (config.reportUrl === undefined) return undefined;
    const url = new URL(config.reportUrl);
    url.searchParams.set("notification_id", notificationId);
    return url.toString();
  };

  const send = async (message: OutboundMessage): Promise<ProviderAnswer> => {
    if (!E164.test(message.to)) return { outcome: "permanent", reason: "plivo: the phone number is not E.164" };
    const url = reportUrl(message.notificationId);
    try {
      const answer = await withDeadline(
        client.messages.create(config.from, message.to, message.body, {
          ...(url === undefined ? {} : { url, method: "POST" }),
          ...smsValidity(message),
        }),
        config.timeoutMs,
      );
      if (answer === TIMED_OUT) return timedOut;
      const providerId = answer.messageUuid?.[0];
      if (providerId === undefined) {
        // Plivo queued nothing for a destination it lists as invalid.
        return { outcome: "permanent", reason: `plivo: invalid number ${answer.invalidNumber?.join(",") ?? ""}` };
      }
      return { outcome: "accepted", providerId };
    } catch (error) {
      return classify(error, timedOut);
    }
  };

  return { name: "plivo", channel: "sms", send };
}

/** Plivo's range for message_expiry, in seconds; past the longest it keeps a message anyway. */
const EXPIRY_RANGE = { min: 5, max: 10_800 };

/**
 * The SMS validity period from the notification's deadline: Plivo drops a message still queued
 * for the carrier when it runs out. A deadline further out than Plivo keeps messages needs none.
 */
export function smsValidity(
  message: Pick<OutboundMessage, "deliverBy">,
  now = Date.now(),
): { message_expiry?: number } {
  const left = secondsLeft(message.deliverBy, now);
  if (left === null || left > EXPIRY_RANGE.max) return {};
  return { message_expiry: Math.max(EXPIRY_RANGE.min, left) };
}
