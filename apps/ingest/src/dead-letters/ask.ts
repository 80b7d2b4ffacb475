import { type Bus, type Reply, requestReply } from "@notify/bus";
import { AppError, ERROR_CODES } from "@notify/core";
import { DEPENDENCY_RETRY_AFTER_SECONDS, toAppError } from "@notify/http";

/**
 * How long a dead-letter route waits for the processor's answer: a replay of 1000 letters fits,
 * and so does a page whose filters (class, notification_id) have every letter of the window read.
 */
export const PROCESSOR_TIMEOUT_MS = 30_000;

/**
 * Asks a processor on `subject` and answers what it answered: the value, or its error as the
 * AppError the API answers. Ingest reads no stream and holds no send guard: the dead-letter
 * routes are the processor's work. No processor answering (none running, or no answer within the
 * timeout) is a 503 with Retry-After, as any dependency out of reach.
 */
export async function askProcessor<T>(bus: Bus, subject: string, body: unknown, timeoutMs: number): Promise<T> {
  let reply: Reply<T>;
  try {
    reply = await requestReply<T>(bus, subject, body, timeoutMs);
  } catch (error) {
    throw toAppError(error);
  }
  if (reply.ok) return reply.value;
  const { code, message, fields } = reply.error;
  if (code === "dependency_unavailable") {
    throw new AppError(code, message, { context: { retryAfterSeconds: DEPENDENCY_RETRY_AFTER_SECONDS } });
  }
  // A code this version does not know (a newer processor's) is still a failure, not a success.
  if (!(code in ERROR_CODES)) throw new AppError("internal", message);
  throw new AppError(code, message, fields ? { fields } : {});
}
