/**
 * Deliver-by deadlines: a notification that carries one is never sent after it. A one-time
 * passcode that arrives late is worse than none, so work still unsent at its deadline ends as
 * `expired` instead of going out late.
 */

/** How far out a deadline (or a template's time to live) may be: the longest a push service keeps a message. */
export const MAX_DEADLINE_SECONDS = 28 * 24 * 3600;

// RFC 3339 section 5.6 date-time: seconds required, a fraction optional, and an offset (Z or
// +hh:mm) required, so that the instant is never a guess about the sender's time zone.
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|([+-])(\d{2}):(\d{2}))$/;

const isLeap = (year: number) => year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const daysIn = (year: number, month: number) => (month === 2 && isLeap(year) ? 29 : (DAYS[month - 1] as number));

/** Whether the calendar has this day: no 30th of February, no 31st of April. */
export const dayExists = (year: number, month: number, day: number) =>
  month >= 1 && month <= 12 && day >= 1 && day <= daysIn(year, month);

/**
 * The instant an RFC 3339 date-time names, or null when the text is not one (a date without a
 * time, no offset, a 30th of February, an hour 24). A leap second (:60) is read as the next
 * second's start, as JavaScript time has none.
 */
export function parseRfc3339(text: string): Date | null {
  const m = RFC3339.exec(text);
  if (m === null) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (!dayExists(year, month, day)) return null;
  if (hour > 23 || minute > 59 || second > 60) return null;
  let offsetMinutes = 0;
  if (m[9] !== undefined) {
    const offsetHours = Number(m[10]);
    const offsetMins = Number(m[11]);
    if (offsetHours > 23 || offsetMins > 59) return null;
    offsetMinutes = (m[9] === "-" ? -1 : 1) * (offsetHours * 60 + offsetMins);
  }
  const fraction = m[7] === undefined ? 0 : Math.floor(Number(`0${m[7]}`) * 1000);
  // Not Date.UTC: it reads years 0-99 as 1900-1999.
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, fraction);
  const utc = date.getTime() - offsetMinutes * 60_000;
  return Number.isFinite(utc) ? new Date(utc) : null;
}

/** What is wrong with a deadline asked for at `now`, or null: it must lie ahead, and not too far. */
export function deadlineProblem(deadline: Date, now: Date): string | null {
  if (deadline.getTime() <= now.getTime()) return "must be in the future";
  if (deadline.getTime() - now.getTime() > MAX_DEADLINE_SECONDS * 1000)
    return `must be at most ${MAX_DEADLINE_SECONDS / 86_400} days from now`;
  return null;
}

/** Whether work with this deadline (an ISO string; none when null or absent) may no longer be sent at `now` (ms). */
export function isPastDeadline(deliverBy: string | null | undefined, now: number): boolean {
  if (deliverBy === null || deliverBy === undefined) return false;
  return Date.parse(deliverBy) <= now;
}

/** Whole seconds left before the deadline at `now` (ms), 0 once it passed; null without one. */
export function secondsLeft(deliverBy: string | null | undefined, now: number): number | null {
  if (deliverBy === null || deliverBy === undefined) return null;
  return Math.max(0, Math.floor((Date.parse(deliverBy) - now) / 1000));
}

/** The reason an expired channel carries: where the deadline was found passed. */
export type ExpiryReason =
  | "deadline_passed"
  | "deadline_before_quiet_hours_end"
  | "deadline_before_send_at"
  | "deadline_before_next_attempt";
