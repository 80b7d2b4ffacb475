import type { ErrorCode, FieldError } from "@notify/core";
import type { Bus } from "./connection.js";

/**
 * Core NATS request-reply between the apps (no stream: a request nobody answers fails at once
 * with "no responders"). One app asks; every instance of the app that may do the work answers in
 * a queue group, so exactly one of them does. Bodies are JSON.
 */

/** An answer: the value, or the error the answering side met (an AppError's code, message and fields). */
export type Reply<T> =
  | { ok: true; value: T }
  | { ok: false; error: { code: ErrorCode; message: string; fields?: FieldError[] } };

/**
 * Sends `body` and waits up to `timeoutMs` for the answer. Nobody answering (no responder, or no
 * answer in time) throws the client's NoRespondersError or TimeoutError, which libs/http answers
 * as 503 dependency_unavailable with Retry-After, as any NATS outage.
 */
export async function requestReply<T>(
  bus: Pick<Bus, "nc">,
  subject: string,
  body: unknown,
  timeoutMs: number,
): Promise<Reply<T>> {
  const msg = await bus.nc.request(subject, JSON.stringify(body), { timeout: timeoutMs });
  return msg.json<Reply<T>>();
}

export interface Responder {
  /** Resolves once the server has the subscription: a request sent after it finds this responder. */
  ready: Promise<void>;
  /** Stops taking requests and waits for those in hand to be answered. */
  stop(): Promise<void>;
}

/**
 * Answers each request on `subject` with what `handle` makes of its body (JSON; a body that is
 * none is handed over as undefined), one instance of the `queue` group per request. `handle`
 * answers a Reply itself, errors included: a throw is answered as an internal error.
 */
export function answerRequests(
  bus: Pick<Bus, "nc">,
  subject: string,
  queue: string,
  handle: (body: unknown) => Promise<Reply<unknown>>,
): Responder {
  const inHand = new Set<Promise<void>>();
  const subscription = bus.nc.subscribe(subject, {
    queue,
    callback: (error, msg) => {
      if (error || !msg.reply) return;
      let body: unknown;
      try {
        body = msg.json();
      } catch {
        body = undefined;
      }
      const answering = handle(body)
        .catch((): Reply<unknown> => ({ ok: false, error: { code: "internal", message: "unexpected error" } }))
        .then((reply) => {
          // The asker may be gone (timed out, disconnected): nothing to answer then.
          if (!bus.nc.isClosed()) msg.respond(JSON.stringify(reply));
        })
        .catch(() => {})
        .finally(() => inHand.delete(answering));
      inHand.add(answering);
    },
  });
  return {
    ready: bus.nc.flush(),
    async stop() {
      if (!subscription.isClosed()) await subscription.drain().catch(() => subscription.unsubscribe());
      await Promise.all(inHand);
    },
  };
}
