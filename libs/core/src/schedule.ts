import { firstInstantAt, type LocalDate, parseClock, wallTime } from "./quiet-hours.js";

/**
 * A send time on the user's wall clock: `time` ("HH:MM", 24-hour) on `date` ("YYYY-MM-DD"),
 * or, without a date, the next instant the user's clock reads `time`.
 */
export interface SendAtLocal {
  time: string;
  date?: string;
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DAY_MS = 86_400_000;

/** The calendar date of "YYYY-MM-DD", or null when the calendar has no such day. */
export function parseLocalDate(value: string): LocalDate | null {
  const match = DATE.exec(value);
  if (!match) return null;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const d = new Date(Date.UTC(year, month - 1, day));
  if (year < 1 || d.getUTCFullYear() !== year || d.getUTCMonth() !== month - 1 || d.getUTCDate() !== day) return null;
  return { year, month, day };
}

/**
 * The instant a local send time names in `tz`, seen from `now`. With a date: that date's first
 * instant whose wall clock reads `time` (a time skipped by a spring-forward jump resolves to
 * the jump, a time repeated by a fall-back to its first occurrence, as quiet hours resolve them);
 * it may lie in the past, and then the notification goes at once. Without a date: today's such
 * instant if it is still to come, else tomorrow's.
 */
export function resolveSendAtLocal(local: SendAtLocal, tz: string, now: Date): Date {
  const minute = parseClock(local.time);
  if (minute === null) throw new RangeError(`not a clock time: ${local.time}`);
  if (local.date !== undefined) {
    const date = parseLocalDate(local.date);
    if (date === null) throw new RangeError(`not a calendar date: ${local.date}`);
    return firstInstantAt(date, minute, tz);
  }
  const today = wallTime(now, tz);
  const at = firstInstantAt(today, minute, tz);
  if (at.getTime() > now.getTime()) return at;
  const next = new Date(Date.UTC(today.year, today.month - 1, today.day) + DAY_MS);
  return firstInstantAt(
    { year: next.getUTCFullYear(), month: next.getUTCMonth() + 1, day: next.getUTCDate() },
    minute,
    tz,
  );
}

/** How far ahead a notification may be scheduled. */
export const MAX_SCHEDULE_DAYS = 365;

/**
 * What is wrong with a send time asked for at `now`, or null. One in the past is fine (it goes
 * at once); it must not lie more than MAX_SCHEDULE_DAYS ahead, and must come before the
 * deadline, if any: a notification due after its deadline could only expire.
 */
export function sendAtProblem(sendAt: Date, deliverBy: Date | null, now: Date): string | null {
  if (sendAt.getTime() - now.getTime() > MAX_SCHEDULE_DAYS * DAY_MS)
    return `must be at most ${MAX_SCHEDULE_DAYS} days from now`;
  if (deliverBy !== null && sendAt.getTime() >= deliverBy.getTime()) return "must be before deliver_by";
  return null;
}

/**
 * The zone a user's wall-clock send time is read in: their preference's time zone, else their
 * quiet hours' zone, else UTC.
 */
export const userZone = (timeZone: string | null | undefined, quietHoursZone: string | null | undefined): string =>
  timeZone ?? quietHoursZone ?? "UTC";
