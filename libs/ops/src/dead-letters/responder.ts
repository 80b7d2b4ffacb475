import { answerRequests, type Bus, type Reply, type Responder } from "@notify/bus";
import { type AppError, type ReplayAnswer, ReplayRequest, validate } from "@notify/core";
import type { Database } from "@notify/db";
import type { DeadLetterFilters } from "./filter.js";
import { replayDeadLetters } from "./replay-selected.js";

/** The queue group of the processors answering replays: one instance takes each request. */
export const REPLAY_QUEUE = "processor-replay";

/** What the responder logs (a pino logger fits). */
interface ReplayLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

export interface ReplayDeps {
  database: Database;
  bus: Bus;
  log: ReplayLog;
  /**
   * How the host answers a thrown error (the processor: libs/http's toAppError, so a database or
   * NATS outage is a 503 dependency_unavailable, as the API would answer it).
   */
  explain: (error: unknown) => AppError;
  /** CRITICAL_CATEGORIES: today's preferences are checked with them, as routing does. */
  criticalCategories: readonly string[];
}

/**
 * One replay (libs/ops replayDeadLetters, what `notify dlq replay` runs), as
 * POST /api/v1/dead-letters/replay answers it: one channel at a time from its latest letter,
 * each planned against the channel, the send guard and the user's preferences and address
 * today. A dry run changes nothing and sends nothing; it shows each letter's address then
 * (`previous_to`) and now (`to`).
 */
export async function runReplay(deps: ReplayDeps, request: ReplayRequest): Promise<ReplayAnswer> {
  const filters: DeadLetterFilters = {
    ...(request.channel ? { channel: request.channel } : {}),
    ...(request.class ? { class: request.class } : {}),
    ...(request.since ? { since: request.since } : {}),
    ...(request.until ? { until: request.until } : {}),
    ...(request.notification_id ? { notification: request.notification_id } : {}),
  };
  const dryRun = request.dry_run === true;
  const outcome = await replayDeadLetters(
    { database: deps.database, bus: deps.bus, criticalCategories: deps.criticalCategories },
    {
      seqs: request.seqs ?? [],
      filters,
      includeUnsettled: request.include_unsettled === true,
      dryRun,
      ...(request.from_seq !== undefined ? { fromSeq: request.from_seq } : {}),
    },
  );
  return {
    dry_run: dryRun,
    selected: outcome.selected,
    replayed: outcome.replayed,
    skipped: outcome.skipped,
    remaining: outcome.remaining,
    next_seq: outcome.nextSeq,
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

/**
 * The privileged half of the operator's replay: ingest (internet-facing, no send guard or work
 * subject of its own) asks on notify.ops.replay; every processor instance answers in one queue
 * group. The request is validated again here: only what the API accepts is run. The answer is
 * the replay's, or the error as the API would answer it (a dependency out of reach is a 503).
 */
export function startReplayResponder(deps: ReplayDeps): Responder {
  return answerRequests(
    deps.bus,
    deps.bus.subjects.opsReplay,
    REPLAY_QUEUE,
    async (body): Promise<Reply<ReplayAnswer>> => {
      try {
        const answer = await runReplay(deps, validate(ReplayRequest, body));
        deps.log.info(
          {
            dry_run: answer.dry_run,
            selected: answer.selected,
            replayed: answer.replayed,
            skipped: answer.skipped,
            remaining: answer.remaining,
          },
          answer.dry_run ? "dead letters replay planned" : "dead letters replayed",
        );
        return { ok: true, value: answer };
      } catch (error) {
        const appError = deps.explain(error);
        if (appError.status >= 500) {
          const level = appError.code === "dependency_unavailable" ? "warn" : "error";
          deps.log[level]({ err: error }, "dead-letter replay failed");
        }
        return {
          ok: false,
          error: {
            code: appError.code,
            message: appError.message,
            ...(appError.fields ? { fields: appError.fields } : {}),
          },
        };
      }
    },
  );
}
