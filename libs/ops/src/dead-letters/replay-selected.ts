import type { Bus } from "@notify/bus";
import { type Channel, guardKey } from "@notify/core";
import type { Database } from "@notify/db";
import { type DeadLetterFilters, latestPerChannel } from "./filter.js";
import { planReplay } from "./plan.js";
import { channelStates, readDeadLetters } from "./read.js";
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
  /** Sequences to replay; none: every letter the filters select. */
  seqs: readonly number[];
  filters: DeadLetterFilters;
  includeUnsettled: boolean;
  /** Plan only: nothing is changed or sent. */
  dryRun: boolean;
}

/**
 * Replays the selected dead letters one channel at a time (a channel dead-lettered more than
 * once from its latest letter), each planned against the channel, guard and preferences as they
 * are now. `onProgress` hears after each one. Answers each result and how many were replayed.
 */
export async function replayDeadLetters(
  deps: { database: Database; bus: Bus; criticalCategories: readonly string[] },
  selection: ReplaySelection,
  onProgress?: (done: number, total: number) => void,
): Promise<{ results: ReplayResult[]; selected: number; replayed: number; skipped: number }> {
  const guard = await deps.bus.kv("notify_send_guard");
  let letters = await readDeadLetters(deps.bus, selection.filters);
  if (selection.seqs.length > 0) letters = letters.filter((l) => selection.seqs.includes(l.seq));
  const selected = latestPerChannel(letters);
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
  return { results, selected: selected.length, replayed, skipped };
}
