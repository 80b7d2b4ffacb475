import { Agent as HttpAgent, request as httpRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { type WebhookAnswer, webhookEnvelope, webhookMessageId } from "@notify/core";
import type { ClaimedDelivery } from "@notify/db";
import { endpointRefusal, guardedLookup } from "@notify/providers";
import { Webhook } from "standardwebhooks";

export interface PostOptions {
  timeoutMs: number;
  /** Loopback and private addresses, and plain http: the development stack's receiver only. */
  allowPrivateNetworks: boolean;
  now?: () => Date;
}

/**
 * Connections to endpoints are kept open between posts, as receivers expect of a webhook sender:
 * a connection (and a TLS handshake) per post costs both ends more than the post itself. Each new
 * connection's addresses are checked when it is made (`guardedLookup`); one idle for 30 s closes.
 */
const agents = {
  http: new HttpAgent({ keepAlive: true, timeout: 30_000, scheduling: "lifo" }),
  https: new HttpsAgent({ keepAlive: true, timeout: 30_000, scheduling: "lifo" }),
};

/** The most of an endpoint's answer that is read (and kept in an attempt's error). */
const ANSWER_BYTES = 1024;

/**
 * The Standard Webhooks headers of a post: `webhook-id` (the same on every attempt),
 * `webhook-timestamp` (seconds) and `webhook-signature`, one `v1,<base64>` per secret separated
 * by spaces (two during a rotation's grace), computed by the standardwebhooks package.
 */
export function signedHeaders(
  secrets: readonly string[],
  messageId: string,
  at: Date,
  body: string,
): Record<string, string> {
  return {
    "webhook-id": messageId,
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": secrets.map((secret) => new Webhook(secret).sign(messageId, at, body)).join(" "),
  };
}

/** Retry-After in ms: seconds or an HTTP date; undefined when absent or unreadable. */
const retryAfterMs = (value: string | string[] | undefined, now: number): number | undefined => {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined) return undefined;
  if (/^\d+$/.test(text.trim())) return Number(text.trim()) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
};

/**
 * Posts one event to its endpoint, signed, and answers how it went: a 2xx is success, anything
 * else (another status, no answer within `timeoutMs`, a refused or private address) a failure
 * to retry. Redirects are not followed: a 3xx is a failure like any other. The URL is checked
 * again here (it may predate a stricter rule) and every address it resolves to at connect time,
 * so a name that rebinds to an internal address is never called.
 */
export async function postEvent(delivery: ClaimedDelivery, options: PostOptions): Promise<WebhookAnswer> {
  const policy = { allowedHosts: ["*"], allowPrivateNetworks: options.allowPrivateNetworks };
  const plainHttpAllowed = options.allowPrivateNetworks && delivery.url.startsWith("http:");
  const refusal = plainHttpAllowed ? undefined : endpointRefusal(delivery.url, policy);
  if (refusal !== undefined) return { ok: false, statusCode: null, error: refusal };
  const now = options.now?.() ?? new Date();
  const body = JSON.stringify(webhookEnvelope(delivery.event));
  const headers = {
    "content-type": "application/json",
    "user-agent": "notify-webhooks/1",
    ...signedHeaders(delivery.secrets, webhookMessageId(delivery.event.id), now, body),
  };
  const url = new URL(delivery.url);
  const request = url.protocol === "http:" ? httpRequest : httpsRequest;
  return new Promise<WebhookAnswer>((resolve) => {
    let settled = false;
    const finish = (answer: WebhookAnswer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(answer);
    };
    const req = request(
      url,
      {
        method: "POST",
        headers: { ...headers, "content-length": Buffer.byteLength(body) },
        lookup: guardedLookup(policy) as never,
        agent: url.protocol === "http:" ? agents.http : agents.https,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          if (size < ANSWER_BYTES) chunks.push(chunk);
          size += chunk.length;
        });
        res.on("error", () => {});
        res.on("end", () => {
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) return finish({ ok: true, statusCode: status });
          const text = Buffer.concat(chunks).subarray(0, ANSWER_BYTES).toString("utf8").trim();
          finish({
            ok: false,
            statusCode: status,
            error: `HTTP ${status}${text === "" ? "" : `: ${text.slice(0, 200)}`}`,
            retryAfterMs: retryAfterMs(res.headers["retry-after"], Date.now()),
          });
        });
      },
    );
    const timer = setTimeout(() => {
      finish({ ok: false, statusCode: null, error: `no answer within ${options.timeoutMs} ms` });
      req.destroy();
    }, options.timeoutMs);
    req.on("error", (error: NodeJS.ErrnoException) => {
      finish({ ok: false, statusCode: null, error: error.code ? `${error.code}: ${error.message}` : error.message });
    });
    req.end(body);
  });
}
