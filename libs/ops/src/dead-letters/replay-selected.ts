import { type Bus, getDeadLetter, readDeadLetterBatch, type StoredLetter } from "@notify/bus";
import { type Channel, guardKey, REPLAY_BATCH_LIMIT, REPLAY_SCAN_LIMIT } from "@notify/core";
import type { Database } from "@notify/db";
import { type DeadLetterFilters, latestPerChannel, matchesEveryFilter } from "./filter.js";
import { planReplay } from "./plan.js";
import { channelStates } from "./read.js";
import { replay } from "./replay.js";

export interface ReplayResult {
  seq: number;
  notification_id: string;
  channel: Channel;
  /** "replayed", "would replay...", or "skipped: <why>". */
  result: string;
  /** Where it went (or would go): the user's address now. */
  to?: string;
  /** The address in the letter, where the failed send went: with `to`, the dry run's diff. */
  previous_to: string;
}

export interface ReplaySelection {
  /** Sequences to replay (each read by its sequence, then filtered); none: the letters the filters select. */
  seqs: readonly number[];
  filters: DeadLetterFilters;
  includeUnsettled: boolean;
  /** Plan only: nothing is changed or sent. */
  dryRun: boolean;
  /** A selection by filters starts at this sequence (a previous call's `nextSeq`). */
  fromSeq?: number;
  /** Letters a selection by filters takes at most (REPLAY_BATCH_LIMIT): the rest is left for another call. */
  limit?: number;
  /** Letters a selection by filters looks at at most (REPLAY_SCAN_LIMIT): the rest is left for another call. */
  scanLimit?: number;
}

/** Dead letters read by sequence at once. */
const GETS_AT_ONCE = 32;

/** The named letters that exist and match the filters, oldest first, each read by its sequence. */
async function lettersBySeq(bus: Bus, seqs: readonly number[], filters: DeadLetterFilters): Promise<StoredLetter[]> {
  const wanted = [...new Set(seqs)].sort((a, b) => a - b);
  const letters: StoredLetter[] = [];
  for (let i = 0; i < wanted.length; i += GETS_AT_ONCE) {
    const got = await Promise.all(wanted.slice(i, i + GETS_AT_ONCE).map((seq) => getDeadLetter(bus, seq)));
    for (const stored of got) if (stored && matchesEveryFilter(stored, filters)) letters.push(stored);
  }
  return letters;
}

/**
 * Replays the selected dead letters one channel at a time (a channel dead-lettered more than
 * once from its latest letter), each planned against the channel, guard and preferences as they
 * are now. `onProgress` hears after each one. Answers each result and how many were replayed.
 * Named letters are read by sequence; a selection by filters takes at most `limit` letters and
 * looks at at most `scanLimit` messages of the stream (from `fromSeq` on, up to `until`), and
 * answers how many messages after them it left (`remaining`, at most that many letters: the
 * filters beyond channel and since were not applied to them) and where they start (`nextSeq`),
 * so that no call holds the whole stream in memory or reads it for long.
 */
export async function replayDeadLetters(
  deps: { database: Database; bus: Bus; criticalCategories: readonly string[] },
  selection: ReplaySelection,
  onProgress?: (done: number, total: number) => void,
): Promise<{
  results: ReplayResult[];
  selected: number;
  replayed: number;
  skipped: number;
  remaining: number;
  nextSeq: number | null;
}> {
  const guard = await deps.bus.kv("notify_send_guard");
  const { filters } = selection;
  const batch =
    selection.seqs.length > 0
      ? { letters: await lettersBySeq(deps.bus, selection.seqs, filters), remaining: 0, nextSeq: null }
      : await readDeadLetterBatch(deps.bus, {
          ...(filters.channel ? { channel: filters.channel } : {}),
          ...(filters.since ? { since: filters.since } : {}),
          ...(filters.until ? { until: filters.until } : {}),
          ...(selection.fromSeq !== undefined ? { fromSeq: selection.fromSeq } : {}),
          limit: selection.limit ?? REPLAY_BATCH_LIMIT,
          scanLimit: selection.scanLimit ?? REPLAY_SCAN_LIMIT,
          keep: (stored) => matchesEveryFilter(stored, filters),
        });
  const selected = latestPerChannel(batch.letters);
  const states = await channelStates(deps.database, selected);
  const context = {
    database: deps.database,
    guard,
    criticalCategories: deps.criticalCategories,
    now: new Date(),
  };

  const results: ReplayResult[] = [];
  let replayed = 0;
  for (const [i, l] of selected.entries()) {
    const { notification_id } = l.letter.item;
    const plan = await planReplay(
      context,
      l.letter,
      states.get(guardKey(notification_id, l.letter.channel)),
      selection.includeUnsettled,
    );
    let result: string;
    if (plan.action === "skip") result = `skipped: ${plan.why}`;
    else if (selection.dryRun)
      result = plan.address_changed ? "would replay to the user's new address" : "would replay";
    else {
      const why = await replay(
        { database: deps.database, bus: deps.bus, guard },
        plan.item,
        selection.includeUnsettled,
      );
      if (why === null) replayed++;
      result = why === null ? "replayed" : `skipped: ${why}`;
    }
    results.push({
      seq: l.seq,
      notification_id,
      channel: l.letter.channel,
      result,
      ...(plan.action === "replay" ? { to: plan.item.to } : {}),
      previous_to: l.letter.item.to,
    });
    onProgress?.(i + 1, selected.length);
  }
  const skipped = results.filter((r) => r.result.startsWith("skipped")).length;
  return {
    results,
    selected: selected.length,
    replayed,
    skipped,
    remaining: batch.remaining,
    nextSeq: batch.nextSeq,
  };
}
