import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { STATUS_CODES } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { serve } from "@hono/node-server";
import { type Context, Hono, type MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import * as v from "valibot";
import { type MailAddress, type MailContent, parseMailSend, type SendgridErrorDetail } from "./mail-send.js";

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
 * a SendGrid-shaped error; `delay_ms` alone holds the request, then answers normally.
 */
export const SandboxFault = v.pipe(
  v.object({
    status: v.optional(v.pipe(v.number(), v.integer(), v.minValue(400), v.maxValue(599))),
    retry_after_seconds: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))),
    delay_ms: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))),
    /** Sends to affect; unlimited until the faults are cleared. */
    times: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
    /** Only sends with this recipient (case-insensitive). */
    match_to: v.optional(v.pipe(v.string(), v.email())),
  }),
  v.check((f) => f.status !== undefined || f.delay_ms !== undefined, "a fault needs a status or a delay_ms"),
);
export type SandboxFault = v.InferOutput<typeof SandboxFault>;

export interface SendgridSandboxOptions {
  /** When set, requests must carry exactly this key, as SendGrid checks its keys. */
  apiKey?: string;
}

export interface SendgridSandbox {
  /** Serves `/v3/mail/send` plus the `/sandbox/*` control routes. */
  readonly app: Hono;
  messages(): SandboxMail[];
  /** Forgets accepted mail and clears every fault. */
  reset(): void;
  fault(fault: SandboxFault): void;
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

interface ActiveFault {
  fault: SandboxFault;
  remaining: number;
}

export function createSendgridSandbox(options: SendgridSandboxOptions = {}): SendgridSandbox {
  let mails: SandboxMail[] = [];
  let faults: ActiveFault[] = [];

  const addFault = (input: SandboxFault): void => {
    const fault = v.parse(SandboxFault, input);
    faults.push({ fault, remaining: fault.times ?? Number.POSITIVE_INFINITY });
  };

  const takeFault = (recipients: string[]): SandboxFault | undefined => {
    const active = faults.find(
      (f) => f.fault.match_to === undefined || recipients.includes(f.fault.match_to.toLowerCase()),
    );
    if (active === undefined) return undefined;
    active.remaining -= 1;
    if (active.remaining <= 0) faults = faults.filter((f) => f !== active);
    return active.fault;
  };

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
    if (fault?.delay_ms !== undefined) await sleep(fault.delay_ms, undefined, { ref: false });
    if (fault?.status !== undefined) {
      const retryAfter = fault.retry_after_seconds;
      return statusError(fault.status, retryAfter === undefined ? undefined : { "Retry-After": String(retryAfter) });
    }

    const messageId = newMessageId();
    const receivedAt = new Date().toISOString();
    for (const p of mail.personalizations) {
      mails.push({
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
    return c.body(null, 202, { "X-Message-Id": messageId });
  };

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
    mails = [];
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
    faults = [];
    return c.body(null, 204);
  });

  return {
    app,
    messages: () => [...mails],
    reset: () => {
      mails = [];
      faults = [];
    },
    fault: addFault,
  };
}

/** Serves a sandbox over real HTTP, so the real SendGrid client can talk to it. */
export async function startSendgridSandbox(options: StartSendgridSandboxOptions = {}): Promise<RunningSendgridSandbox> {
  const sandbox = createSendgridSandbox(options.apiKey === undefined ? {} : { apiKey: options.apiKey });
  const host = options.host ?? "127.0.0.1";
  const { server, port } = await new Promise<{ server: ReturnType<typeof serve>; port: number }>((resolve, reject) => {
    const server = serve({ fetch: sandbox.app.fetch, port: options.port ?? 0, hostname: host }, (info) =>
      resolve({ server, port: info.port }),
    );
    server.once("error", reject);
  });
  return {
    ...sandbox,
    url: `http://${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        // Held (delayed) requests would otherwise keep close() waiting for their sockets.
        if ("closeAllConnections" in server) server.closeAllConnections();
      }),
  };
}
