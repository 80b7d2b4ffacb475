/**
 * Wall-clock time in a user's IANA time zone, and quiet windows on it. Everything here takes
 * the zone from the user's record, never from the server.
 *
 * A quiet window {start, end} is one contiguous span of real time per night: it opens at the
 * first instant of a local day whose wall clock reads `start` or later and closes at the first
 * such instant for `end` (on the next local day when the window crosses midnight). That rule
 * settles both daylight-saving cases the same way:
 * - a time that does not exist (clocks jump forward over it) resolves to the jump, so 02:30 on
 *   the night New York skips 02:00-03:00 means 03:00 EDT;
 * - a time that happens twice (clocks fall back) resolves to its first occurrence, so a window
 *   ending at 01:30 ends at 01:30 EDT and does not reopen at 01:30 EST, and a window starting
 *   at 01:30 covers the repeated hour with no hole in it.
 * A plain "is the wall clock between start and end" test gets both wrong.
 */

export interface QuietHours {
  /** "HH:MM", 24-hour, in `tz`. A window crosses midnight when start > end. */
  start: string;
  end: string;
  /** IANA time zone, e.g. "Europe/London". */
  tz: string;
}

export interface LocalDate {
  year: number;
  month: number;
  day: number;
}

export interface WallTime extends LocalDate {
  hour: number;
  minute: number;
  second: number;
}

const CLOCK = /^([01]\d|2[0-3]):([0-5]\d)$/;
/** Area/Location names and the legacy single names (UTC, EST5EDT); never a numeric offset. */
const ZONE_NAME = /^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/;
const DAY_MS = 86_400_000;

/** Minutes since local midnight of an "HH:MM" (00:00-23:59) string, or null. */
export function parseClock(value: string): number | null {
  const match = CLOCK.exec(value);
  return match ? Number(match[1]) * 60 + Number(match[2]) : null;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(tz: string): Intl.DateTimeFormat {
  let found = formatters.get(tz);
  if (!found) {
    found = new Intl.DateTimeFormat("en-US", {
      timeZone: tz,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    // Spellings of valid zones are bounded in practice; the cap only guards against abuse.
    if (formatters.size >= 2000) formatters.clear();
    formatters.set(tz, found);
  }
  return found;
}

/** Whether `value` names a time zone of the IANA database that this runtime knows. */
export function isTimeZone(value: string): boolean {
  if (value.length > 64 || !ZONE_NAME.test(value)) return false;
  try {
    formatter(value);
    return true;
  } catch {
    return false;
  }
}

/** The wall clock in `tz` at an instant (second precision). */
export function wallTime(instant: Date | number, tz: string): WallTime {
  const parts = formatter(tz).formatToParts(instant);
  const get = (type: Intl.DateTimeFormatPartTypes) => Number(parts.find((p) => p.type === type)?.value);
  return {
    year: get("year"),
    month: get("month"),
    day: get("day"),
    hour: get("hour"),
    minute: get("minute"),
    second: get("second"),
  };
}

/** The wall clock read as if it were UTC: lets wall times be compared and offset as numbers. */
const wallMs = (w: WallTime) => Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second);

/** The local calendar date in `tz` at an instant, as "YYYY-MM-DD" (the daily cap's day). */
export function localDate(instant: Date | number, tz: string): string {
  const w = wallTime(instant, tz);
  return `${String(w.year).padStart(4, "0")}-${String(w.month).padStart(2, "0")}-${String(w.day).padStart(2, "0")}`;
}

const addDays = (date: LocalDate, days: number): LocalDate => {
  const d = new Date(Date.UTC(date.year, date.month - 1, date.day + days));
  return { year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate() };
};

/** UTC offset of `tz` at an instant, in ms (wall clock minus UTC). */
const offsetAt = (instant: number, tz: string) => wallMs(wallTime(instant, tz)) - Math.floor(instant / 1000) * 1000;

/**
 * The first instant of local date `date` in `tz` at which the wall clock reads
 * `minuteOfDay` or later: the one instant that time names, the earlier of two when clocks fall
 * back, the moment of the jump when clocks spring over it.
 */
export function firstInstantAt(date: LocalDate, minuteOfDay: number, tz: string): Date {
  const target = Date.UTC(date.year, date.month - 1, date.day, 0, minuteOfDay);
  // A real zone changes offset at most once within a day on either side of a wall time.
  const before = offsetAt(target - DAY_MS, tz);
  const after = offsetAt(target + DAY_MS, tz);
  const exact = [target - before, target - after].filter((c) => wallMs(wallTime(c, tz)) === target);
  if (exact.length > 0) return new Date(Math.min(...exact));
  // The wall time was skipped: find the jump, the first instant whose wall clock is past it.
  let low = Math.min(target - before, target - after);
  let high = Math.max(target - before, target - after);
  while (high - low > 1000) {
    const middle = low + Math.floor((high - low) / 2000) * 1000;
    if (wallMs(wallTime(middle, tz)) >= target) high = middle;
    else low = middle;
  }
  return new Date(high);
}

export interface QuietWindow {
  start: Date;
  end: Date;
}

/** The quiet window containing `instant`, or null when the instant is outside quiet hours. */
export function quietWindowAt(instant: Date | number, quiet: QuietHours): QuietWindow | null {
  const start = parseClock(quiet.start);
  const end = parseClock(quiet.end);
  if (start === null || end === null || start === end) return null;
  const t = typeof instant === "number" ? instant : instant.getTime();
  const today = wallTime(t, quiet.tz);
  // The window holding t opened on t's local day or the day before (when it crosses midnight).
  for (const back of [1, 0]) {
    const opened = addDays(today, -back);
    const from = firstInstantAt(opened, start, quiet.tz);
    const to = firstInstantAt(end > start ? opened : addDays(opened, 1), end, quiet.tz);
    if (from.getTime() <= t && t < to.getTime()) return { start: from, end: to };
  }
  return null;
}
