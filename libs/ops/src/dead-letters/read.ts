import {
  type Bus,
  getDeadLetter,
  pageDeadLetterStream,
  readDeadLetterStream,
  type StoredLetter,
  streamDeadLetters,
} from "@notify/bus";
import { type DeadLetterListRequest, type DeadLetterPage, type DeadLetterShown, guardKey } from "@notify/core";
import { type ChannelState, type Database, readChannelStates, readStatusEvents, type StatusEvent } from "@notify/db";
import { type DeadLetterFilters, filtersOf, matchesFilters } from "./filter.js";

/**
 * The dead letters the filters select, oldest first, read without changing anything on the
 * server (the stream is the record of dead letters).
 */
export function readDeadLetters(bus: Bus, filters: DeadLetterFilters): Promise<StoredLetter[]> {
  return readDeadLetterStream(bus, {
    ...(filters.channel ? { channel: filters.channel } : {}),
    ...(filters.since ? { since: filters.since } : {}),
    keep: (stored) => matchesFilters(stored, filters),
  });
}

/**
 * One page of the dead letters the filters select, newest first (the `limit` after the `offset`
 * newest), and how many the filters select. Filtered by channel and time only, just the page is
 * read (pageDeadLetterStream). A filter on what a letter says (its reason, class or
 * notification) has every letter of the window read, but only the newest `offset + limit`
 * matches are held, however many letters there are.
 */
export async function pageDeadLetters(
  bus: Bus,
  filters: DeadLetterFilters,
  page: { offset: number; limit: number },
): Promise<{ letters: StoredLetter[]; total: number }> {
  const window = {
    ...(filters.channel ? { channel: filters.channel } : {}),
    ...(filters.since ? { since: filters.since } : {}),
  };
  if (filters.reason === undefined && filters.class === undefined && filters.notification === undefined) {
    return pageDeadLetterStream(bus, { ...window, ...(filters.until ? { until: filters.until } : {}), ...page });
  }
  const held = page.offset + page.limit;
  let newest: StoredLetter[] = [];
  let total = 0;
  for await (const stored of streamDeadLetters(bus, window)) {
    // Stored in time order: nothing after the first letter past `until` is in the window.
    if (filters.until && stored.time > filters.until) break;
    if (!matchesFilters(stored, filters)) continue;
    total++;
    newest.push(stored);
    if (newest.length >= 2 * held) newest = newest.slice(-held);
  }
  const letters = newest
    .slice(-held)
    .reverse()
    .slice(page.offset, page.offset + page.limit);
  return { letters, total };
}

/** The state now of each letter's channel, by guardKey; none for a notification since gone. */
export async function channelStates(
  database: Database,
  letters: readonly StoredLetter[],
): Promise<Map<string, ChannelState>> {
  const rows = await readChannelStates(
    database,
    letters.map((l) => ({ notificationId: l.letter.item.notification_id, channel: l.letter.channel })),
  );
  return new Map(rows.map((row) => [guardKey(row.notification_id, row.channel), row]));
}

/** The status of a letter's channel now: "gone" once its notification is. */
export const statusNow = (states: Map<string, ChannelState>, l: StoredLetter) =>
  states.get(guardKey(l.letter.item.notification_id, l.letter.channel))?.status ?? "gone";

export interface DeadLetterDetail {
  stored: StoredLetter;
  /** Undefined once the notification is gone. */
  state: ChannelState | undefined;
  history: StatusEvent[];
}

/** One dead letter whole, with its channel's state and status history now; fails for an unknown sequence. */
export async function showDeadLetter(deps: { bus: Bus; database: Database }, seq: number): Promise<DeadLetterDetail> {
  const detail = await findDeadLetter(deps, seq);
  if (!detail) throw new Error(`no dead letter with sequence ${seq} (messages set aside as poison: notify dlq poison)`);
  return detail;
}

/** showDeadLetter, or null when the sequence holds no dead letter (never stored, gone, or poison). */
export async function findDeadLetter(
  deps: { bus: Bus; database: Database },
  seq: number,
): Promise<DeadLetterDetail | null> {
  const stored = await getDeadLetter(deps.bus, seq);
  if (!stored) return null;
  const [state] = [...(await channelStates(deps.database, [stored])).values()];
  const history = await readStatusEvents(deps.database, stored.letter.item.notification_id, stored.letter.channel);
  return { stored, state, history };
}

/**
 * One page of the dead letters as GET /api/v1/dead-letters answers it (the processor's answer on
 * notify.ops.dlq.list): newest first, total_count the filtered count. Only the page is read
 * unless a filter looks inside the letters (class, notification_id): see pageDeadLetters.
 */
export async function deadLetterPage(bus: Bus, request: DeadLetterListRequest): Promise<DeadLetterPage> {
  const page = await pageDeadLetters(bus, filtersOf(request), {
    offset: (request.page - 1) * request.page_size,
    limit: request.page_size,
  });
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
    page: request.page,
    page_size: request.page_size,
    total_count: page.total,
  };
}

/**
 * One letter as GET /api/v1/dead-letters/{seq} answers it (the processor's answer on
 * notify.ops.dlq.show): the letter in full, its channel's status now and its status history;
 * null when the sequence holds none.
 */
export async function deadLetterShown(
  deps: { bus: Bus; database: Database },
  seq: number,
): Promise<DeadLetterShown | null> {
  const detail = await findDeadLetter(deps, seq);
  if (!detail) return null;
  const { stored, state, history } = detail;
  return {
    seq: stored.seq,
    dead_lettered_at: stored.time.toISOString(),
    letter: stored.letter,
    status_now: state
      ? {
          notification_id: state.notification_id,
          channel: state.channel,
          status: state.status,
          reason: state.reason,
          attempts: state.attempts,
        }
      : null,
    status_history: history.map((event) => ({
      status: event.status,
      reason: event.reason,
      attempt: event.attempt,
      at: event.at.toISOString(),
    })),
  };
}
