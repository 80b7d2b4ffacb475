import type { StoredLetter } from "@notify/bus";
import { type Channel, type DeadLetter, type DeadLetterClass, guardKey } from "@notify/core";

/** Which dead letters an operator means: every one given matches. */
export interface DeadLetterFilters {
  channel?: Channel;
  /** A class exactly, or any part of the reason text (case-insensitive). */
  reason?: string;
  /** A class exactly (the API's `class`). */
  class?: DeadLetterClass;
  since?: Date;
  until?: Date;
  notification?: string;
}

/** The API's filters (the list's query, a replay's body, the processor's requests) as DeadLetterFilters. */
export function filtersOf(request: {
  channel?: Channel | undefined;
  class?: DeadLetterClass | undefined;
  since?: Date | undefined;
  until?: Date | undefined;
  notification_id?: string | undefined;
}): DeadLetterFilters {
  return {
    ...(request.channel ? { channel: request.channel } : {}),
    ...(request.class ? { class: request.class } : {}),
    ...(request.since ? { since: request.since } : {}),
    ...(request.until ? { until: request.until } : {}),
    ...(request.notification_id ? { notification: request.notification_id } : {}),
  };
}

/** A reason filter matches a class exactly, or any part of the reason text (case-insensitive). */
export const reasonMatches = (letter: DeadLetter, reason: string) =>
  letter.class === reason || letter.reason.toLowerCase().includes(reason.toLowerCase());

/**
 * The filters the stream read cannot apply itself (it starts at `since` and reads one channel's
 * subject): the end of the window, the reason, the class and the notification.
 */
export function matchesFilters(stored: StoredLetter, filters: DeadLetterFilters): boolean {
  if (filters.until && stored.time > filters.until) return false;
  if (filters.reason !== undefined && !reasonMatches(stored.letter, filters.reason)) return false;
  if (filters.class !== undefined && stored.letter.class !== filters.class) return false;
  if (filters.notification !== undefined && stored.letter.item.notification_id !== filters.notification) return false;
  return true;
}

/** Every filter, those a stream read applies itself too (channel, since): for letters read one by one. */
export function matchesEveryFilter(stored: StoredLetter, filters: DeadLetterFilters): boolean {
  if (filters.channel !== undefined && stored.letter.channel !== filters.channel) return false;
  if (filters.since && stored.time < filters.since) return false;
  return matchesFilters(stored, filters);
}

/** A channel dead-lettered more than once (replayed, failed again) counts by its latest letter. */
export function latestPerChannel(letters: readonly StoredLetter[]): StoredLetter[] {
  const latest = new Map<string, StoredLetter>();
  for (const l of letters) latest.set(guardKey(l.letter.item.notification_id, l.letter.channel), l);
  return [...latest.values()];
}
