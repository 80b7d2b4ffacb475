import { answerRequests, type Bus, type Reply, type Responder } from "@notify/bus";
import {
  AppError,
  DeadLetterListRequest,
  type DeadLetterPage,
  type DeadLetterShown,
  DeadLetterShowRequest,
  type ReplayAnswer,
  ReplayMessage,
  type ReplayRequest,
  validate,
} from "@notify/core";
import type { Database } from "@notify/db";
import { filtersOf } from "./filter.js";
import { deadLetterPage, deadLetterShown } from "./read.js";
import { replayDeadLetters } from "./replay-selected.js";

/** The queue group of the processors answering replays: one instance takes each request. */
export const REPLAY_QUEUE = "processor-replay";
/** The queue group of the processors answering dead-letter reads (list, show). */
export const DEAD_LETTER_READ_QUEUE = "processor-dlq";

/** What the responder logs (a pino logger fits). */
interface ResponderLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

export interface DeadLetterResponderDeps {
  database: Database;
  bus: Bus;
  log: ResponderLog;
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
export async function runReplay(
  deps: Pick<DeadLetterResponderDeps, "database" | "bus" | "criticalCategories">,
  request: ReplayRequest,
): Promise<ReplayAnswer> {
  const dryRun = request.dry_run === true;
  const outcome = await replayDeadLetters(
    { database: deps.database, bus: deps.bus, criticalCategories: deps.criticalCategories },
    {
      seqs: request.seqs ?? [],
      filters: filtersOf(request),
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
 * Answers `subject` in `queue` with what `work` makes of each request, or with the error as the
 * API would answer it (a dependency out of reach is a 503). A server-side failure is logged with
 * what `work` put in `context` before it failed. The cancel's responder (cancel.ts) answers so too.
 */
export function answer<T>(
  deps: Pick<DeadLetterResponderDeps, "bus" | "log" | "explain">,
  subject: string,
  queue: string,
  what: string,
  work: (body: unknown, context: Record<string, unknown>) => Promise<T>,
): Responder {
  return answerRequests(deps.bus, subject, queue, async (body): Promise<Reply<T>> => {
    const context: Record<string, unknown> = {};
    try {
      return { ok: true, value: await work(body, context) };
    } catch (error) {
      const appError = deps.explain(error);
      if (appError.status >= 500) {
        const level = appError.code === "dependency_unavailable" ? "warn" : "error";
        deps.log[level]({ ...context, err: error }, `${what} failed`);
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
  });
}

/**
 * The processor's half of the operator's dead-letter routes: ingest (internet-facing, no
 * consumer on any stream, no send guard or work subject of its own) asks; every processor
 * instance answers in a queue group, so one takes each request.
 *
 * - notify.ops.dlq.list: a page of the dead letters (GET /api/v1/dead-letters).
 * - notify.ops.dlq.show: one letter whole, or `not_found` (GET /api/v1/dead-letters/{seq}).
 * - notify.ops.replay: a replay (POST /api/v1/dead-letters/replay), with `requested_by`, the
 *   key that asked: each replay is logged with it, its counts and whether it was a dry run.
 *
 * Each request is validated again here: only what the API accepts is run, whoever sent it. The
 * answer is what the route answers, or the error as the API would answer it.
 */
export function startDeadLetterResponder(deps: DeadLetterResponderDeps): Responder {
  const list = answer<DeadLetterPage>(
    deps,
    deps.bus.subjects.opsDlqList,
    DEAD_LETTER_READ_QUEUE,
    "dead-letter list",
    async (body) => deadLetterPage(deps.bus, validate(DeadLetterListRequest, body)),
  );
  const show = answer<DeadLetterShown>(
    deps,
    deps.bus.subjects.opsDlqShow,
    DEAD_LETTER_READ_QUEUE,
    "dead-letter read",
    async (body) => {
      const { seq } = validate(DeadLetterShowRequest, body);
      const shown = await deadLetterShown(deps, seq);
      if (!shown) throw new AppError("not_found", `no dead letter with sequence ${seq}`);
      return shown;
    },
  );
  const replay = answer<ReplayAnswer>(
    deps,
    deps.bus.subjects.opsReplay,
    REPLAY_QUEUE,
    "dead-letter replay",
    async (body, context) => {
      const { requested_by: by, ...request } = validate(ReplayMessage, body);
      Object.assign(context, { key_id: by.key_id, client_id: by.client_id, dry_run: request.dry_run === true });
      const replayed = await runReplay(deps, request);
      deps.log.info(
        {
          key_id: by.key_id,
          client_id: by.client_id,
          dry_run: replayed.dry_run,
          selected: replayed.selected,
          replayed: replayed.replayed,
          skipped: replayed.skipped,
          remaining: replayed.remaining,
        },
        replayed.dry_run ? "dead letters replay planned" : "dead letters replayed",
      );
      return replayed;
    },
  );
  const responders = [list, show, replay];
  return {
    ready: Promise.all(responders.map((r) => r.ready)).then(() => {}),
    async stop() {
      await Promise.all(responders.map((r) => r.stop()));
    },
  };
}
