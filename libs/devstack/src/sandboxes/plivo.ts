import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { plivoSignatureV2, plivoSignatureV3 } from "@notify/providers";
import { type Context, Hono } from "hono";
import * as v from "valibot";
import { createCallbackPoster, postStatus } from "./callbacks.js";
import { FaultSpan, faultQueue } from "./faults.js";
import { openJournal } from "./journal.js";
import { serveApp } from "./serve.js";

/** One accepted message, as Plivo would queue it. */
export interface PlivoSandboxMessage {
  message_uuid: string;
  src: string;
  dst: string;
  text: string;
  /** The delivery-report URL the sender asked for, if any. */
  url: string | null;
  received_at: string;
}

/** One delivery report the sandbox posted, and what the receiver answered (0: unreachable). */
export interface PlivoSandboxReport {
  url: string;
  params: Record<string, string>;
  answer: number;
}

/**
 * What the next matching sends meet. `status` answers with a Plivo-shaped error; `delay_ms`
 * holds the request first; `report_status` accepts the message but reports it undelivered,
 * failed or rejected (with `error_code`), as a carrier would.
 */
export const PlivoSandboxFault = v.pipe(
  v.object({
    status: v.optional(v.pipe(v.number(), v.integer(), v.minValue(400), v.maxValue(599))),
    retry_after_seconds: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))),
    delay_ms: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))),
    report_status: v.optional(v.picklist(["undelivered", "failed", "rejected"])),
    error_code: v.optional(v.pipe(v.string(), v.regex(/^\d{1,6}$/))),
    ...FaultSpan,
    /** Only sends to this number (E.164). */
    match_dst: v.optional(v.string()),
  }),
  v.check(
    (f) => f.status !== undefined || f.delay_ms !== undefined || f.report_status !== undefined,
    "a fault needs a status, a delay_ms or a report_status",
  ),
);
export type PlivoSandboxFault = v.InferOutput<typeof PlivoSandboxFault>;

export interface PlivoSandboxOptions {
  authId: string;
  /** Checks the API's Basic auth and signs the delivery reports, as Plivo does. */
  authToken: string;
  /** Wait before posting each report; receipts then often arrive before the send is recorded. */
  reportDelayMs?: number;
  /**
   * Where messages sent to our numbers are posted (a Plivo application's message URL:
   * apps/receipts' /webhooks/plivo/inbound), signed as Plivo signs them.
   */
  inboundUrl?: string;
  /**
   * A JSON Lines file (created 0600 with its folder) that makes the sandbox durable: accepted
   * messages are written to it before the answer and read back at start, and each delivery
   * report is posted until the receiver answers 2xx, across restarts. In memory when unset.
   */
  journal?: string;
}

/**
 * The journal's lines. `message`: one accepted message and the parameters of the delivery
 * reports planned for it, in order (`sent`, then the final status; none without a `url`);
 * `acked`: the report with that Status was answered 2xx; `clear`: the messages before it were
 * forgotten (reset, DELETE).
 */
export type PlivoJournalEntry =
  | { type: "message"; message: PlivoSandboxMessage; reports: Array<Record<string, string>> }
  | { type: "acked"; message_uuid: string; status: string }
  | { type: "clear" };

export interface PlivoSandbox {
  /** Serves Plivo's `/v1/Account/{auth_id}/Message/` plus the `/sandbox/*` control routes. */
  readonly app: Hono;
  messages(): PlivoSandboxMessage[];
  reports(): PlivoSandboxReport[];
  /**
   * Posts a message from a phone to `inboundUrl`, signed (V2 and V3) as Plivo does, once;
   * answers what the receiver answered (Plivo then sends any reply it holds). Undefined when no
   * inbound URL is set.
   */
  inbound(request: PlivoInboundRequest): Promise<PlivoInboundAnswer | undefined>;
  /**
   * Resolves once every report scheduled so far has been posted (or given up on). With a
   * journal, nothing is given up on: once every report was answered 2xx, or stop().
   */
  settled(): Promise<void>;
  /** Forgets messages (durably, with a journal) and reports, and clears every fault. */
  reset(): void;
  fault(fault: PlivoSandboxFault): void;
  /**
   * Ends the retries of unacknowledged reports (the journal has them for the next start) and
   * waits for posts under way. Without a journal, posts under way are left to finish.
   */
  stop(): Promise<void>;
}

export interface RunningPlivoSandbox extends PlivoSandbox {
  /** API origin for the plivo client's `url` option, e.g. http://127.0.0.1:54321 */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

const E164_DIGITS = /^\+?[1-9]\d{6,14}$/;

/** A message a phone sends to one of our numbers, over POST /sandbox/inbound. */
export const PlivoInboundRequest = v.object({
  from: v.pipe(v.string(), v.regex(E164_DIGITS, "must be a phone number (E.164)")),
  to: v.pipe(v.string(), v.regex(E164_DIGITS, "must be a phone number (E.164)")),
  text: v.pipe(v.string(), v.maxLength(1600)),
});
export type PlivoInboundRequest = v.InferOutput<typeof PlivoInboundRequest>;

/** What the inbound message's receiver answered: its status, content type and body (Plivo XML). */
export interface PlivoInboundAnswer {
  message_uuid: string;
  /** 0: unreachable. */
  status: number;
  content_type: string | null;
  body: string;
}

const digest = (value: string): Buffer => createHash("sha256").update(value).digest();

const plivoError = (c: Context, status: number, error: string, headers: Record<string, string> = {}) =>
  c.json({ api_id: randomUUID(), error }, status as 400, headers);

export function createPlivoSandbox(options: PlivoSandboxOptions): PlivoSandbox {
  let messages: PlivoSandboxMessage[] = [];
  let reports: PlivoSandboxReport[] = [];
  const faults = faultQueue<PlivoSandboxFault>();
  const inFlight = new Set<Promise<void>>();
  const journal = options.journal === undefined ? undefined : openJournal<PlivoJournalEntry>(options.journal);
  const poster = createCallbackPoster(journal !== undefined);
  // Reports from earlier runs no receiver has acknowledged yet, by message.
  const unacknowledged = new Map<string, { message: PlivoSandboxMessage; reports: Array<Record<string, string>> }>();
  for (const entry of journal?.entries ?? []) {
    if (entry.type === "message") {
      messages.push(entry.message);
      if (entry.reports.length > 0) unacknowledged.set(entry.message.message_uuid, entry);
    } else if (entry.type === "acked") {
      const pending = unacknowledged.get(entry.message_uuid);
      if (pending === undefined) continue;
      const reports = pending.reports.filter((params) => params.Status !== entry.status);
      if (reports.length === 0) unacknowledged.delete(entry.message_uuid);
      else unacknowledged.set(entry.message_uuid, { ...pending, reports });
    } else if (entry.type === "clear") {
      messages = [];
    }
  }

  const addFault = (input: PlivoSandboxFault): void => faults.add(v.parse(PlivoSandboxFault, input));
  const takeFault = (dst: string): PlivoSandboxFault | undefined =>
    faults.take((f) => f.match_dst === undefined || f.match_dst === dst);

  /**
   * Plivo retries a callback that failed. In memory, three tries a second apart are enough
   * locally; with a journal, until acknowledged, then the journal says so. False when stopped.
   */
  const postReport = async (message: PlivoSandboxMessage, url: string, params: Record<string, string>) => {
    if (options.reportDelayMs) await sleep(options.reportDelayMs, undefined, { ref: false });
    const form: Record<string, string[]> = Object.fromEntries(Object.entries(params).map(([k, value]) => [k, [value]]));
    const answer = await poster.post((signal) => {
      const nonce = randomBytes(12).toString("hex");
      const headers = {
        "content-type": "application/x-www-form-urlencoded",
        "x-plivo-signature-v2": plivoSignatureV2(options.authToken, url, nonce),
        "x-plivo-signature-v2-nonce": nonce,
        "x-plivo-signature-v3": plivoSignatureV3(options.authToken, "POST", url, form, nonce),
        "x-plivo-signature-v3-nonce": nonce,
      };
      return postStatus(url, { headers, body: new URLSearchParams(params), signal });
    });
    if (answer === undefined) return false;
    journal?.append({ type: "acked", message_uuid: message.message_uuid, status: params.Status ?? "" });
    reports.push({ url, params, answer });
    return true;
  };

  /** The reports a carrier would send for this message: `sent`, then the final status. */
  const planReports = (message: PlivoSandboxMessage, fault: PlivoSandboxFault | undefined) => {
    if (message.url === null) return [];
    const base = { MessageUUID: message.message_uuid, From: message.src, To: message.dst, Units: "1" };
    const final = fault?.report_status ?? "delivered";
    const finalParams: Record<string, string> =
      final === "delivered"
        ? { ...base, Status: final }
        : { ...base, Status: final, ErrorCode: fault?.error_code ?? "30" };
    return [{ ...base, Status: "sent" }, finalParams];
  };

  // One after the other, as a carrier reports states in order.
  const scheduleReports = (message: PlivoSandboxMessage, planned: Array<Record<string, string>>): void => {
    const { url } = message;
    if (url === null || planned.length === 0) return;
    const task = (async () => {
      for (const params of planned) if (!(await postReport(message, url, params))) return;
    })();
    inFlight.add(task);
    void task.finally(() => inFlight.delete(task));
  };

  const send = async (c: Context): Promise<Response> => {
    const [scheme, encoded] = (c.req.header("authorization") ?? "").split(" ");
    const [authId, ...token] = Buffer.from(encoded ?? "", "base64")
      .toString()
      .split(":");
    if (
      scheme !== "Basic" ||
      authId !== c.req.param("authId") ||
      authId !== options.authId ||
      !timingSafeEqual(digest(token.join(":")), digest(options.authToken))
    ) {
      return plivoError(c, 401, "Authentication credentials invalid");
    }
    const body = (await c.req.json().catch(() => undefined)) as Record<string, unknown> | undefined;
    const src = body?.src;
    const dst = body?.dst;
    const text = body?.text;
    const url = body?.url;
    if (typeof src !== "string" || src === "") return plivoError(c, 400, "src parameter not present");
    if (typeof dst !== "string" || dst === "") return plivoError(c, 400, "dst parameter not present");
    if (typeof text !== "string" || text === "") return plivoError(c, 400, "text parameter not present");
    if (url !== undefined && (typeof url !== "string" || !URL.canParse(url))) {
      return plivoError(c, 400, "url parameter is not a valid URL");
    }
    if (!E164_DIGITS.test(dst)) return plivoError(c, 400, `invalid dst number: ${dst}`);
    const number = dst.startsWith("+") ? dst : `+${dst}`;

    const fault = takeFault(number);
    if (fault?.delay_ms !== undefined) await sleep(fault.delay_ms, undefined, { ref: false });
    if (fault?.status !== undefined) {
      const retryAfter = fault.retry_after_seconds;
      return plivoError(
        c,
        fault.status,
        "sandbox fault",
        retryAfter === undefined ? {} : { "Retry-After": String(retryAfter) },
      );
    }

    const message: PlivoSandboxMessage = {
      message_uuid: randomUUID(),
      src,
      dst: number,
      text,
      url: typeof url === "string" ? url : null,
      received_at: new Date().toISOString(),
    };
    const planned = planReports(message, fault);
    // Written before the answer: a message the sender was told was queued is never forgotten.
    journal?.append({ type: "message", message, reports: planned });
    messages.push(message);
    scheduleReports(message, planned);
    return c.json({ api_id: randomUUID(), message: "message(s) queued", message_uuid: [message.message_uuid] }, 202);
  };

  /** Once, as a phone's message is one post; Plivo's own retries of a failed post are not modelled. */
  const inbound = async (request: PlivoInboundRequest): Promise<PlivoInboundAnswer | undefined> => {
    const url = options.inboundUrl;
    if (url === undefined) return undefined;
    const { from, to, text } = v.parse(PlivoInboundRequest, request);
    const messageUuid = randomUUID();
    // Plivo posts numbers without the +.
    const params: Record<string, string> = {
      From: from.replace(/^\+/, ""),
      To: to.replace(/^\+/, ""),
      Type: "sms",
      Text: text,
      MessageUUID: messageUuid,
      Units: "1",
    };
    const form: Record<string, string[]> = Object.fromEntries(Object.entries(params).map(([k, value]) => [k, [value]]));
    const nonce = randomBytes(12).toString("hex");
    try {
      const res = await fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          "x-plivo-signature-v2": plivoSignatureV2(options.authToken, url, nonce),
          "x-plivo-signature-v2-nonce": nonce,
          "x-plivo-signature-v3": plivoSignatureV3(options.authToken, "POST", url, form, nonce),
          "x-plivo-signature-v3-nonce": nonce,
        },
        body: new URLSearchParams(params),
      });
      return {
        message_uuid: messageUuid,
        status: res.status,
        content_type: res.headers.get("content-type"),
        body: await res.text(),
      };
    } catch {
      return { message_uuid: messageUuid, status: 0, content_type: null, body: "" };
    }
  };

  const forgetMessages = (): void => {
    journal?.append({ type: "clear" });
    messages = [];
  };

  // Unacknowledged reports from earlier runs: posted again, as Plivo retries its callbacks.
  for (const { message, reports: planned } of unacknowledged.values()) scheduleReports(message, planned);

  const app = new Hono();
  app.post("/v1/Account/:authId/Message/", send);
  app.get("/sandbox/messages", (c) => {
    const dst = c.req.query("dst");
    return c.json({ data: messages.filter((m) => dst === undefined || m.dst === dst) });
  });
  app.get("/sandbox/reports", (c) => c.json({ data: reports }));
  app.delete("/sandbox/messages", (c) => {
    forgetMessages();
    reports = [];
    return c.body(null, 204);
  });
  app.post("/sandbox/inbound", async (c) => {
    const parsed = v.safeParse(PlivoInboundRequest, await c.req.json().catch(() => undefined));
    if (!parsed.success) return plivoError(c, 400, parsed.issues.map((i) => i.message).join("; "));
    const answer = await inbound(parsed.output);
    if (answer === undefined) return plivoError(c, 409, "no inbound message URL is configured");
    return c.json(answer);
  });
  app.post("/sandbox/faults", async (c) => {
    const parsed = v.safeParse(PlivoSandboxFault, await c.req.json().catch(() => undefined));
    if (!parsed.success) return plivoError(c, 400, parsed.issues.map((i) => i.message).join("; "));
    addFault(parsed.output);
    return c.body(null, 204);
  });
  app.delete("/sandbox/faults", (c) => {
    faults.clear();
    return c.body(null, 204);
  });

  return {
    app,
    messages: () => [...messages],
    reports: () => [...reports],
    inbound,
    settled: async () => {
      while (inFlight.size > 0) await Promise.all([...inFlight]);
    },
    reset: () => {
      forgetMessages();
      reports = [];
      faults.clear();
    },
    fault: addFault,
    stop: async () => {
      if (journal === undefined) return;
      poster.stop();
      while (inFlight.size > 0) await Promise.all([...inFlight]);
    },
  };
}

export async function startPlivoSandbox(
  options: PlivoSandboxOptions & { port?: number; host?: string },
): Promise<RunningPlivoSandbox> {
  const sandbox = createPlivoSandbox(options);
  const host = options.host ?? "127.0.0.1";
  const served = await serveApp(sandbox.app, {
    host,
    ...(options.port === undefined ? {} : { port: options.port }),
  }).catch(async (error: unknown) => {
    // A journal's re-posts have started: they must not outlive a sandbox that never listened.
    await sandbox.stop();
    throw error;
  });
  return {
    ...sandbox,
    url: `http://${host}:${served.port}`,
    port: served.port,
    close: async () => {
      await served.close();
      await sandbox.stop();
    },
  };
}
