import type { Bus } from "@notify/bus";
import { pageDeadLetters } from "@notify/ops";
import { asDependencyError } from "../dependency.js";
import type { DeadLetterSummary, ListDeadLettersQuery } from "./schemas.js";

/**
 * GET /api/v1/dead-letters: the NOTIFY_DLQ stream is the record of dead letters, read the way
 * `notify dlq list` reads it (nothing changes on the server), newest first. The filters select
 * the letters before they are counted, so total_count is the filtered count. Only the page is
 * read unless a filter looks inside the letters (class, notification_id): see pageDeadLetters.
 */
export async function listDeadLetters(
  bus: Bus,
  query: ListDeadLettersQuery,
): Promise<{ data: DeadLetterSummary[]; page: number; page_size: number; total_count: number }> {
  let page: Awaited<ReturnType<typeof pageDeadLetters>>;
  try {
    page = await pageDeadLetters(
      bus,
      {
        ...(query.channel ? { channel: query.channel } : {}),
        ...(query.class ? { class: query.class } : {}),
        ...(query.since ? { since: query.since } : {}),
        ...(query.until ? { until: query.until } : {}),
        ...(query.notification_id ? { notification: query.notification_id } : {}),
      },
      { offset: (query.page - 1) * query.page_size, limit: query.page_size },
    );
  } catch (error) {
    throw asDependencyError(error, "nats");
  }
  return {
    data: page.letters.map(({ seq, time, letter }) => ({
      seq,
      dead_lettered_at: time.toISOString(),
      channel: letter.channel,
      lane: letter.lane,
      class: letter.class,
      reason: letter.reason,
      provider: letter.provider,
      attempts: letter.attempts,
      notification_id: letter.item.notification_id,
      client_id: letter.notification?.client_id ?? null,
      user_id: letter.item.user_id,
    })),
    page: query.page,
    page_size: query.page_size,
    total_count: page.total,
  };
}
