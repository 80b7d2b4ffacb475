import type { Bus } from "@notify/bus";
import { AppError } from "@notify/core";
import type { Database } from "@notify/db";
import { type DeadLetterFilters, findDeadLetter, replayDeadLetters } from "@notify/ops";
import { asDependencyError } from "../dependency.js";
import type { ReplayRequest } from "./schemas.js";

export interface ReplayAnswer {
  dry_run: boolean;
  selected: number;
  replayed: number;
  skipped: number;
  data: Array<{
    seq: number;
    notification_id: string;
    channel: string;
    result: string;
    to: string | null;
    previous_to: string;
  }>;
}

/**
 * POST /api/v1/dead-letters/replay: what `notify dlq replay` does (libs/ops replayDeadLetters),
 * one channel at a time from its latest letter, each planned against the channel, the send
 * guard and the user's preferences and address today. A dry run changes nothing and sends
 * nothing; it shows each letter's address then (`previous_to`) and now (`to`).
 */
export async function replayLetters(
  deps: { database: Database; bus: Bus; criticalCategories?: readonly string[] },
  request: ReplayRequest,
): Promise<ReplayAnswer> {
  const filters: DeadLetterFilters = {
    ...(request.channel ? { channel: request.channel } : {}),
    ...(request.class ? { class: request.class } : {}),
    ...(request.since ? { since: request.since } : {}),
    ...(request.until ? { until: request.until } : {}),
    ...(request.notification_id ? { notification: request.notification_id } : {}),
  };
  const dryRun = request.dry_run === true;
  let outcome: Awaited<ReturnType<typeof replayDeadLetters>>;
  try {
    outcome = await replayDeadLetters(
      { database: deps.database, bus: deps.bus, criticalCategories: deps.criticalCategories ?? [] },
      { seqs: request.seqs ?? [], filters, includeUnsettled: request.include_unsettled === true, dryRun },
    );
  } catch (error) {
    throw asDependencyError(error, "nats");
  }
  return {
    dry_run: dryRun,
    selected: outcome.selected,
    replayed: outcome.replayed,
    skipped: outcome.skipped,
    data: outcome.results.map((r) => ({
      seq: r.seq,
      notification_id: r.notification_id,
      channel: r.channel,
      result: r.result,
      to: r.to ?? null,
      previous_to: r.previous_to,
    })),
  };
}

/** GET /api/v1/dead-letters/{seq}: the letter in full, its channel's status now and its status history. */
export async function showLetter(deps: { database: Database; bus: Bus }, seq: number) {
  let detail: Awaited<ReturnType<typeof findDeadLetter>>;
  try {
    detail = await findDeadLetter(deps, seq);
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
