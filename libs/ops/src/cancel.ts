import { claimGuard, type KV, type Responder, readGuard } from "@notify/bus";
import {
  CANCEL_REASON,
  type CancelAnswer,
  type CancelByGuard,
  CancelMessage,
  type Channel,
  type ChannelCancel,
  cancelByGuard,
  cancelByStatus,
  type GuardValue,
  guardKey,
  validate,
} from "@notify/core";
import { cancelDigestItem, cancelNotification, type Database } from "@notify/db";
import { answer, type DeadLetterResponderDeps } from "./dead-letters/responder.js";

/** The queue group of the processors answering cancels: one instance takes each request. */
export const CANCEL_QUEUE = "processor-cancel";

/** Looks at a guard that changed under the cancel's compare-and-set this many times before giving up. */
const GUARD_TRIES = 3;

/**
 * Takes a channel's send guard for the cancel: `canceled`, by a create where there is none and a
 * compare-and-set on the revision read where it is `failed` (a retry is due), so a worker
 * claiming it at the same moment either wins, and sends, or finds it canceled, and sends nothing.
 * A guard that changed meanwhile is read and decided again.
 */
async function takeGuard(guard: KV, key: string, now: () => number): Promise<CancelByGuard> {
  for (let tries = 0; tries < GUARD_TRIES; tries++) {
    const seen = await readGuard(guard, key);
    const decision = cancelByGuard(seen?.value ?? null);
    if (decision.action !== "take") return decision;
    const canceled: GuardValue = {
      state: "canceled",
      at: now(),
      attempt: seen?.value.attempt ?? 0,
      reason: CANCEL_REASON,
    };
    if (await claimGuard(guard, key, seen, canceled)) return decision;
  }
  return { action: "keep", why: "its send guard kept changing (a worker is at it); cancel again" };
}

/**
 * Cancels notification `notification_id` of the asking key's client: each channel not sent yet
 * (pending, deferred, retrying or parked, whose send guard no worker holds) is canceled, with its
 * guard (`canceled`: a worker that takes its work item later acknowledges it with nothing sent),
 * in one Postgres transaction with its status, its history row and the end of the deferral timer
 * and of the fallback chain (libs/db cancelNotification). Every waiting channel's guard is
 * taken, a deferred one's too: its timer may remain for another channel after a release
 * published its work item. What was sent, is being sent or ended otherwise stays as it is, with
 * why. Idempotent: a cancel repeated changes nothing more, and one whose commit was lost is
 * finished by the next (the guard already says canceled).
 */
export async function cancelChannels(
  deps: { database: Database; guard: KV; now?: () => number },
  message: CancelMessage,
): Promise<CancelAnswer> {
  const { notification_id: id, requested_by: by } = message;
  const now = deps.now ?? Date.now;
  const outcome = await cancelNotification(deps.database, { id, clientId: by.client_id }, async (tx) => {
    const channels: Partial<Record<Channel, ChannelCancel>> = {};
    const taken: Channel[] = [];
    for (const row of tx.channels) {
      const byStatus = cancelByStatus(row.status);
      if (byStatus.action === "already_canceled") channels[row.channel] = { result: "already_canceled", why: null };
      else if (byStatus.action === "keep") channels[row.channel] = { result: "not_canceled", why: byStatus.why };
      else {
        const byGuard = await takeGuard(deps.guard, guardKey(id, row.channel), now);
        if (byGuard.action === "keep") channels[row.channel] = { result: "not_canceled", why: byGuard.why };
        else taken.push(row.channel);
      }
    }
    // The rows are locked and waiting, so every channel whose guard was taken moves.
    const moved = await tx.cancel(taken, CANCEL_REASON, `${CANCEL_REASON}: key ${by.key_id}`);
    for (const channel of taken) {
      channels[channel] = moved.includes(channel)
        ? { result: "canceled", why: null }
        : { result: "not_canceled", why: "its status changed meanwhile" };
    }
    return channels;
  });
  if (outcome === null) return { outcome: "not_found" };
  if (!outcome.routed) {
    // A digest's item has no channels: it leaves its digest while that is not sent.
    const item = await cancelDigestItem(deps.database, { id, clientId: by.client_id, at: new Date(now()) });
    return item === null ? { outcome: "not_routed" } : { outcome: "done", channels: {}, digest: item };
  }
  return { outcome: "done", channels: outcome.result };
}

/**
 * The processor's answer to ingest's cancels (notify.ops.cancel, POST
 * /api/v1/notifications/{id}/cancel): ingest holds no send guard, so it asks; every processor
 * instance answers in a queue group, so one takes each request. The request is validated again
 * here; each cancel is logged with the key that asked and the channels it canceled.
 */
export function startCancelResponder(
  deps: Pick<DeadLetterResponderDeps, "database" | "bus" | "log" | "explain"> & { now?: () => number },
): Responder {
  return answer<CancelAnswer>(deps, deps.bus.subjects.opsCancel, CANCEL_QUEUE, "cancel", async (body, context) => {
    const message = validate(CancelMessage, body);
    const by = message.requested_by;
    Object.assign(context, { notification_id: message.notification_id, key_id: by.key_id, client_id: by.client_id });
    const guard = await deps.bus.kv("notify_send_guard");
    const answered = await cancelChannels(
      { database: deps.database, guard, ...(deps.now ? { now: deps.now } : {}) },
      message,
    );
    if (answered.outcome === "done") {
      const canceled = Object.entries(answered.channels)
        .filter(([, c]) => c.result === "canceled")
        .map(([channel]) => channel);
      deps.log.info({ ...context, canceled }, "notification canceled");
    }
    return answered;
  });
}
