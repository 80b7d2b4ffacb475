import { setTimeout as sleep } from "node:timers/promises";
import { type Context, Hono } from "hono";
import { Webhook } from "standardwebhooks";
import * as v from "valibot";
import { FaultSpan, faultQueue } from "./faults.js";
import { serveApp } from "./serve.js";

/**
 * A webhook receiver, as a caller of the service would run one: it takes posts at
 * `/hooks/{name}`, checks each one's Standard Webhooks signature with the reference library
 * against the secrets given for that name, and lists what it received. Faults make it slow,
 * answer an error, or drop the connection, for as many posts or as long as asked.
 */

/** One post received. */
export interface ReceivedWebhook {
  name: string;
  webhook_id: string | null;
  webhook_timestamp: string | null;
  /** The signatures as sent: `v1,<base64>`, one per secret the sender signed with, separated by spaces. */
  webhook_signature: string | null;
  /** The body's `type`, when it is JSON with one. */
  type: string | null;
  /** Whether a secret given for this name verifies its signature (standardwebhooks' verify). */
  verified: boolean;
  /** Why it did not verify. */
  problem: string | null;
  /** What the receiver answered (0: it dropped the connection). */
  answer: number;
  body: unknown;
  received_at: string;
}

/** What the next matching posts meet: an answer status, a delay before answering, or a dropped connection. */
export const WebhookReceiverFault = v.pipe(
  v.object({
    status: v.optional(v.pipe(v.number(), v.integer(), v.minValue(300), v.maxValue(599))),
    retry_after_seconds: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))),
    delay_ms: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(120_000))),
    drop: v.optional(v.literal(true)),
    ...FaultSpan,
    /** Only posts to this name. */
    match_name: v.optional(v.string()),
  }),
  v.check(
    (f) => f.status !== undefined || f.delay_ms !== undefined || f.drop !== undefined,
    "a fault needs a status, a delay_ms or drop",
  ),
);
export type WebhookReceiverFault = v.InferOutput<typeof WebhookReceiverFault>;

const SecretsBody = v.object({ secrets: v.pipe(v.array(v.pipe(v.string(), v.startsWith("whsec_"))), v.minLength(1)) });
const NAME = /^[A-Za-z0-9_-]{1,64}$/;

export interface WebhookReceiver {
  readonly app: Hono;
  received(name?: string): ReceivedWebhook[];
  /** The secrets posts to `name` are verified with (an endpoint's secret, and the previous one in a rotation). */
  setSecrets(name: string, secrets: string[]): void;
  fault(fault: WebhookReceiverFault): void;
  reset(): void;
}

export interface RunningWebhookReceiver extends WebhookReceiver {
  /** The origin; an endpoint's URL is `${url}/hooks/{name}`. */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

/** The most a receiver keeps: the oldest posts are forgotten beyond it. */
const KEEP = 200_000;

/** A post without its body's details: its type and the notification, channel and status it is about. */
const compact = (post: ReceivedWebhook): ReceivedWebhook => {
  const body = post.body as { type?: unknown; data?: Record<string, unknown> } | null;
  const data = body?.data ?? {};
  return {
    ...post,
    body: {
      type: body?.type,
      data: { notification_id: data.notification_id, channel: data.channel, status: data.status },
    },
  };
};

export function createWebhookReceiver(): WebhookReceiver {
  let received: ReceivedWebhook[] = [];
  const secrets = new Map<string, string[]>();
  const faults = faultQueue<WebhookReceiverFault>();

  const verify = (name: string, body: string, headers: Record<string, string>): string | null => {
    const given = secrets.get(name);
    if (given === undefined) return `no secret given for ${name}`;
    let last = "no secret verified it";
    for (const secret of given) {
      try {
        new Webhook(secret).verify(body, headers);
        return null;
      } catch (error) {
        last = (error as Error).message;
      }
    }
    return last;
  };

  const receive = async (c: Context): Promise<Response> => {
    const name = c.req.param("name") as string;
    const text = await c.req.text();
    const headers = {
      "webhook-id": c.req.header("webhook-id") ?? "",
      "webhook-timestamp": c.req.header("webhook-timestamp") ?? "",
      "webhook-signature": c.req.header("webhook-signature") ?? "",
    };
    const problem = verify(name, text, headers);
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {}
    const type = typeof body === "object" && body !== null && typeof (body as { type?: unknown }).type === "string";
    const fault = faults.take((f) => f.match_name === undefined || f.match_name === name);
    const record = (answer: number) => {
      received.push({
        name,
        webhook_id: c.req.header("webhook-id") ?? null,
        webhook_timestamp: c.req.header("webhook-timestamp") ?? null,
        webhook_signature: c.req.header("webhook-signature") ?? null,
        type: type ? (body as { type: string }).type : null,
        verified: problem === null,
        problem,
        answer,
        body,
        received_at: new Date().toISOString(),
      });
      if (received.length > KEEP) received = received.slice(-KEEP);
    };
    if (fault?.delay_ms) await sleep(fault.delay_ms);
    if (fault?.drop) {
      record(0);
      // The socket is destroyed without an answer, as a receiver that crashed mid-request.
      (c.env as { incoming?: { socket?: { destroy(): void } } } | undefined)?.incoming?.socket?.destroy();
      return new Response(null, { status: 500 });
    }
    if (fault?.status !== undefined) {
      record(fault.status);
      const retryAfter: Record<string, string> =
        fault.retry_after_seconds === undefined ? {} : { "retry-after": String(fault.retry_after_seconds) };
      return c.json({ error: "sandbox fault" }, fault.status as 500, retryAfter);
    }
    // A receiver answers 401 to a post it cannot verify, so the sender retries and it shows.
    const answer = problem === null ? 204 : 401;
    record(answer);
    return answer === 204 ? c.body(null, 204) : c.json({ error: problem }, 401);
  };

  const app = new Hono();
  app.post("/hooks/:name", (c) => {
    if (!NAME.test(c.req.param("name"))) return c.json({ error: "a name is 1-64 of A-Z, a-z, 0-9, _ and -" }, 404);
    return receive(c);
  });
  // ?name= keeps one endpoint's posts; ?compact=1 leaves each body's details out (a long run's list).
  app.get("/sandbox/received", (c) => {
    const name = c.req.query("name");
    const posts = name === undefined ? received : received.filter((r) => r.name === name);
    return c.json(c.req.query("compact") === "1" ? posts.map(compact) : posts);
  });
  app.put("/sandbox/secrets/:name", async (c) => {
    const name = c.req.param("name");
    if (!NAME.test(name)) return c.json({ error: "a name is 1-64 of A-Z, a-z, 0-9, _ and -" }, 400);
    const parsed = v.safeParse(SecretsBody, await c.req.json().catch(() => undefined));
    if (!parsed.success) return c.json({ error: 'body must be {"secrets": ["whsec_…"]}' }, 400);
    secrets.set(name, parsed.output.secrets);
    return c.body(null, 204);
  });
  app.post("/sandbox/faults", async (c) => {
    const parsed = v.safeParse(WebhookReceiverFault, await c.req.json().catch(() => undefined));
    if (!parsed.success) return c.json({ error: parsed.issues[0]?.message ?? "invalid fault" }, 400);
    faults.add(parsed.output);
    return c.body(null, 204);
  });
  app.delete("/sandbox/received", (c) => {
    received = [];
    faults.clear();
    return c.body(null, 204);
  });

  return {
    app,
    received: (name) => (name === undefined ? [...received] : received.filter((r) => r.name === name)),
    setSecrets: (name, given) => secrets.set(name, [...given]),
    fault: (fault) => faults.add(v.parse(WebhookReceiverFault, fault)),
    reset: () => {
      received = [];
      faults.clear();
    },
  };
}

export async function startWebhookReceiver(
  options: { port?: number; host?: string } = {},
): Promise<RunningWebhookReceiver> {
  const receiver = createWebhookReceiver();
  const host = options.host ?? "127.0.0.1";
  const served = await serveApp(receiver.app, { port: options.port ?? 0, host });
  return {
    ...receiver,
    url: `http://${host === "0.0.0.0" ? "127.0.0.1" : host}:${served.port}`,
    port: served.port,
    close: () => served.close(),
  };
}
