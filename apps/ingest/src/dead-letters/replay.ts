import { type Bus, type Reply, requestReply } from "@notify/bus";
import { AppError, ERROR_CODES, type ReplayAnswer, type ReplayRequest } from "@notify/core";
import type { Database } from "@notify/db";
import { DEPENDENCY_RETRY_AFTER_SECONDS } from "@notify/http";
import { findDeadLetter } from "@notify/ops";
import { asDependencyError } from "../dependency.js";

/** How long POST /api/v1/dead-letters/replay waits for the processor's answer: a batch of 1000 letters fits. */
export const REPLAY_TIMEOUT_MS = 30_000;

/**
 * POST /api/v1/dead-letters/replay: ingest does not replay itself (it holds neither the send
 * guard nor the work subjects); it asks a processor on notify.ops.replay and answers what that
 * answered: the replay, or its error as a problem. No processor answering (none running, or no
 * answer within the timeout) is a 503 with Retry-After, as any dependency out of reach.
 */
export async function replayLetters(
  deps: { bus: Bus; replayTimeoutMs?: number },
  request: ReplayRequest,
): Promise<ReplayAnswer> {
  let reply: Reply<ReplayAnswer>;
  try {
    reply = await requestReply<ReplayAnswer>(
      deps.bus,
      deps.bus.subjects.opsReplay,
      request,
      deps.replayTimeoutMs ?? REPLAY_TIMEOUT_MS,
    );
  } catch (error) {
    throw asDependencyError(error, "nats");
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

/** GET /api/v1/dead-letters/{seq}: the letter in full, its channel's status now and its status history. */
export async function showLetter(deps: { database: Database; bus: Bus }, seq: number) {
  let detail: Awaited<ReturnType<typeof findDeadLetter>>;
  try {
    // Read through an ordered consumer: ingest's user may browse the stream, not get from it.
    detail = await findDeadLetter(deps, seq, { browse: true });
  } catch (error) {
    throw asDependencyError(error, "nats");
  }
  if (!detail) throw new AppError("not_found", `no dead letter with sequence ${seq}`);
  const { stored, state, history } = detail;
  return {
    seq: stored.seq,
    dead_lettered_at: stored.time.toISOString(),
    letter: stored.letter,
    status_now: state ?? null,
    status_history: history,
  };
}
