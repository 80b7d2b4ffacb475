import fc from "fast-check";
import t from "tap";
import {
  firstInstantAt,
  isTimeZone,
  localDate,
  parseClock,
  type QuietHours,
  quietWindowAt,
  wallTime,
} from "../src/index.js";

const iso = (value: string) => new Date(value).getTime();
const at = (instant: string, start: string, end: string, tz: string) => {
  const window = quietWindowAt(iso(instant), { start, end, tz });
  return window && { start: window.start.toISOString(), end: window.end.toISOString() };
};

/**
 * The real 2026 transitions (ICU's tz data):
 * - America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT (07:00Z); 2026-11-01 02:00 EDT -> 01:00 EST (06:00Z)
 * - Europe/London: 2026-03-29 01:00 GMT -> 02:00 BST (01:00Z); 2026-10-25 02:00 BST -> 01:00 GMT (01:00Z)
 * - Australia/Lord_Howe (a 30-minute shift): 2026-04-05 02:00 +11 -> 01:30 +10:30 (15:00Z on the 4th);
 *   2026-10-04 02:00 +10:30 -> 02:30 +11 (15:30Z on the 3rd)
 * - Asia/Kolkata: +05:30 all year
 * Each row: instant, window, and the quiet window containing the instant (null: not quiet).
 */
const table: Array<[string, string, string, string, string, { start: string; end: string } | null]> = [
  // New York, spring forward: the night is an hour shorter in real time.
  [
    "America/New_York",
    "22:00",
    "07:00",
    "2026-03-08T06:30:00Z",
    "01:30 EST",
    { start: "2026-03-08T03:00:00.000Z", end: "2026-03-08T11:00:00.000Z" },
  ],
  [
    "America/New_York",
    "22:00",
    "07:00",
    "2026-03-08T10:59:00Z",
    "06:59 EDT",
    { start: "2026-03-08T03:00:00.000Z", end: "2026-03-08T11:00:00.000Z" },
  ],
  ["America/New_York", "22:00", "07:00", "2026-03-08T11:00:00Z", "07:00 EDT, not 07:00 EST", null],
  ["America/New_York", "02:30", "06:00", "2026-03-08T06:59:00Z", "01:59 EST: start 02:30 does not exist yet", null],
  [
    "America/New_York",
    "02:30",
    "06:00",
    "2026-03-08T07:00:00Z",
    "03:00 EDT: the skipped start opens at the jump",
    { start: "2026-03-08T07:00:00.000Z", end: "2026-03-08T10:00:00.000Z" },
  ],
  [
    "America/New_York",
    "23:00",
    "02:30",
    "2026-03-08T06:59:59Z",
    "01:59:59 EST: end 02:30 is skipped",
    { start: "2026-03-08T04:00:00.000Z", end: "2026-03-08T07:00:00.000Z" },
  ],
  ["America/New_York", "23:00", "02:30", "2026-03-08T07:00:00Z", "03:00 EDT: the window closed at the jump", null],
  [
    "America/New_York",
    "02:15",
    "02:45",
    "2026-03-08T07:00:00Z",
    "a window wholly inside the gap is empty that night",
    null,
  ],
  [
    "America/New_York",
    "02:15",
    "02:45",
    "2026-03-09T06:20:00Z",
    "the next night it is back",
    { start: "2026-03-09T06:15:00.000Z", end: "2026-03-09T06:45:00.000Z" },
  ],
  // New York, fall back: the night is an hour longer; 01:00-02:00 happens twice.
  [
    "America/New_York",
    "22:00",
    "07:00",
    "2026-11-01T11:59:00Z",
    "06:59 EST",
    { start: "2026-11-01T02:00:00.000Z", end: "2026-11-01T12:00:00.000Z" },
  ],
  ["America/New_York", "22:00", "07:00", "2026-11-01T12:00:00Z", "07:00 EST", null],
  [
    "America/New_York",
    "22:00",
    "01:30",
    "2026-11-01T05:29:00Z",
    "01:29 EDT",
    { start: "2026-11-01T02:00:00.000Z", end: "2026-11-01T05:30:00.000Z" },
  ],
  ["America/New_York", "22:00", "01:30", "2026-11-01T05:30:00Z", "01:30 EDT: ends at the first 01:30", null],
  [
    "America/New_York",
    "22:00",
    "01:30",
    "2026-11-01T06:15:00Z",
    "01:15 EST: does not reopen in the repeated hour",
    null,
  ],
  [
    "America/New_York",
    "01:30",
    "06:00",
    "2026-11-01T05:30:00Z",
    "01:30 EDT: opens at the first 01:30",
    { start: "2026-11-01T05:30:00.000Z", end: "2026-11-01T11:00:00.000Z" },
  ],
  [
    "America/New_York",
    "01:30",
    "06:00",
    "2026-11-01T06:15:00Z",
    "01:15 EST: no hole in the repeated hour",
    { start: "2026-11-01T05:30:00.000Z", end: "2026-11-01T11:00:00.000Z" },
  ],
  // London.
  [
    "Europe/London",
    "23:00",
    "07:00",
    "2026-03-29T05:59:00Z",
    "06:59 BST",
    { start: "2026-03-28T23:00:00.000Z", end: "2026-03-29T06:00:00.000Z" },
  ],
  ["Europe/London", "23:00", "07:00", "2026-03-29T06:00:00Z", "07:00 BST", null],
  ["Europe/London", "01:30", "08:00", "2026-03-29T00:59:00Z", "00:59 GMT", null],
  [
    "Europe/London",
    "01:30",
    "08:00",
    "2026-03-29T01:00:00Z",
    "02:00 BST: skipped 01:30 opens at the jump",
    { start: "2026-03-29T01:00:00.000Z", end: "2026-03-29T07:00:00.000Z" },
  ],
  [
    "Europe/London",
    "23:00",
    "07:00",
    "2026-10-25T06:59:00Z",
    "06:59 GMT, nine hours in",
    { start: "2026-10-24T22:00:00.000Z", end: "2026-10-25T07:00:00.000Z" },
  ],
  ["Europe/London", "23:00", "07:00", "2026-10-25T07:00:00Z", "07:00 GMT", null],
  [
    "Europe/London",
    "00:00",
    "01:30",
    "2026-10-25T00:29:00Z",
    "01:29 BST",
    { start: "2026-10-24T23:00:00.000Z", end: "2026-10-25T00:30:00.000Z" },
  ],
  ["Europe/London", "00:00", "01:30", "2026-10-25T01:15:00Z", "01:15 GMT: the repeated half hour stays outside", null],
  // Lord Howe: a 30-minute shift.
  [
    "Australia/Lord_Howe",
    "22:00",
    "07:00",
    "2026-04-04T20:29:00Z",
    "06:59 +10:30",
    { start: "2026-04-04T11:00:00.000Z", end: "2026-04-04T20:30:00.000Z" },
  ],
  ["Australia/Lord_Howe", "22:00", "07:00", "2026-04-04T20:30:00Z", "07:00 +10:30", null],
  [
    "Australia/Lord_Howe",
    "21:00",
    "01:45",
    "2026-04-04T14:44:00Z",
    "01:44 +11",
    { start: "2026-04-04T10:00:00.000Z", end: "2026-04-04T14:45:00.000Z" },
  ],
  ["Australia/Lord_Howe", "21:00", "01:45", "2026-04-04T15:10:00Z", "01:40 +10:30, second pass: outside", null],
  [
    "Australia/Lord_Howe",
    "22:00",
    "07:00",
    "2026-10-03T19:59:00Z",
    "06:59 +11",
    { start: "2026-10-03T11:30:00.000Z", end: "2026-10-03T20:00:00.000Z" },
  ],
  ["Australia/Lord_Howe", "22:00", "07:00", "2026-10-03T20:00:00Z", "07:00 +11", null],
  ["Australia/Lord_Howe", "02:10", "06:00", "2026-10-03T15:29:59Z", "01:59:59 +10:30", null],
  [
    "Australia/Lord_Howe",
    "02:10",
    "06:00",
    "2026-10-03T15:30:00Z",
    "02:30 +11: skipped 02:10 opens at the jump",
    { start: "2026-10-03T15:30:00.000Z", end: "2026-10-03T19:00:00.000Z" },
  ],
  // Kolkata: no transitions, so the same local times give the same UTC times all year.
  [
    "Asia/Kolkata",
    "22:00",
    "07:00",
    "2026-03-08T01:29:00Z",
    "06:59 IST",
    { start: "2026-03-07T16:30:00.000Z", end: "2026-03-08T01:30:00.000Z" },
  ],
  [
    "Asia/Kolkata",
    "22:00",
    "07:00",
    "2026-11-01T01:29:00Z",
    "06:59 IST",
    { start: "2026-10-31T16:30:00.000Z", end: "2026-11-01T01:30:00.000Z" },
  ],
  ["Asia/Kolkata", "22:00", "07:00", "2026-11-01T01:30:00Z", "07:00 IST", null],
  [
    "Asia/Kolkata",
    "09:00",
    "17:00",
    "2026-04-05T03:30:00Z",
    "09:00 IST, a daytime window",
    { start: "2026-04-05T03:30:00.000Z", end: "2026-04-05T11:30:00.000Z" },
  ],
];

t.test("quiet windows across the 2026 daylight-saving transitions", async (t) => {
  for (const [tz, start, end, instant, note, expected] of table) {
    t.same(at(instant, start, end, tz), expected, `${tz} ${start}-${end} at ${instant} (${note})`);
  }
});

t.test("the daily cap's day is the local date in the user's zone, across the transitions", async (t) => {
  const days: Array<[string, string, string]> = [
    ["America/New_York", "2026-03-08T04:59:59Z", "2026-03-07"],
    ["America/New_York", "2026-03-08T05:00:00Z", "2026-03-08"],
    ["America/New_York", "2026-03-09T03:59:59Z", "2026-03-08"],
    ["America/New_York", "2026-03-09T04:00:00Z", "2026-03-09"],
    ["America/New_York", "2026-11-02T04:59:59Z", "2026-11-01"],
    ["America/New_York", "2026-11-02T05:00:00Z", "2026-11-02"],
    ["Europe/London", "2026-03-28T23:59:59Z", "2026-03-28"],
    ["Europe/London", "2026-03-29T22:59:59Z", "2026-03-29"],
    ["Europe/London", "2026-03-29T23:00:00Z", "2026-03-30"],
    ["Australia/Lord_Howe", "2026-04-04T12:59:59Z", "2026-04-04"],
    ["Australia/Lord_Howe", "2026-04-04T13:00:00Z", "2026-04-05"],
    ["Australia/Lord_Howe", "2026-04-05T13:29:59Z", "2026-04-05"],
    ["Australia/Lord_Howe", "2026-04-05T13:30:00Z", "2026-04-06"],
    ["Asia/Kolkata", "2026-03-07T18:29:59Z", "2026-03-07"],
    ["Asia/Kolkata", "2026-03-07T18:30:00Z", "2026-03-08"],
  ];
  for (const [tz, instant, day] of days) t.equal(localDate(iso(instant), tz), day, `${tz} ${instant}`);
});

t.test("firstInstantAt resolves skipped times to the jump and repeated times to the first pass", async (t) => {
  const ny = "America/New_York";
  t.equal(firstInstantAt({ year: 2026, month: 3, day: 8 }, 150, ny).toISOString(), "2026-03-08T07:00:00.000Z");
  t.equal(firstInstantAt({ year: 2026, month: 3, day: 8 }, 180, ny).toISOString(), "2026-03-08T07:00:00.000Z");
  t.equal(firstInstantAt({ year: 2026, month: 3, day: 8 }, 119, ny).toISOString(), "2026-03-08T06:59:00.000Z");
  t.equal(firstInstantAt({ year: 2026, month: 11, day: 1 }, 90, ny).toISOString(), "2026-11-01T05:30:00.000Z");
  t.equal(firstInstantAt({ year: 2026, month: 11, day: 1 }, 120, ny).toISOString(), "2026-11-01T07:00:00.000Z");
  t.equal(
    firstInstantAt({ year: 2026, month: 10, day: 4 }, 135, "Australia/Lord_Howe").toISOString(),
    "2026-10-03T15:30:00.000Z",
  );
  // Santiago springs forward at midnight: 00:00-00:59 of that day never happens.
  t.equal(
    firstInstantAt({ year: 2026, month: 9, day: 6 }, 30, "America/Santiago").toISOString(),
    "2026-09-06T04:00:00.000Z",
  );
});

t.test("clock and zone parsing", async (t) => {
  t.equal(parseClock("00:00"), 0);
  t.equal(parseClock("23:59"), 1439);
  t.equal(parseClock("07:05"), 425);
  for (const bad of ["24:00", "7:00", "07:60", "0700", "07:00:00", " 07:00", "", "ab:cd"]) {
    t.equal(parseClock(bad), null, `rejects ${JSON.stringify(bad)}`);
  }
  for (const zone of ["Europe/London", "America/Argentina/Buenos_Aires", "UTC", "Etc/GMT+5", "Asia/Kolkata"]) {
    t.ok(isTimeZone(zone), `accepts ${zone}`);
  }
  for (const bad of ["+05:00", "GMT+5", "Mars/Olympus", "", "Europe/", "../etc", "Europe London"]) {
    t.notOk(isTimeZone(bad), `rejects ${JSON.stringify(bad)}`);
  }
});

const ZONES = [
  "America/New_York",
  "Europe/London",
  "Australia/Lord_Howe",
  "Asia/Kolkata",
  "America/Santiago",
  "Pacific/Chatham",
  "Europe/Dublin",
  "UTC",
];
const clock = fc
  .tuple(fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 }))
  .map(([h, m]) => `${String(h).padStart(2, "0")}:${String(m).padStart(2, "0")}`);
const quiet = fc
  .record({ start: clock, end: clock, tz: fc.constantFrom(...ZONES) })
  .filter((q: QuietHours) => q.start !== q.end);
const HOUR = 3_600_000;
// Transitions of the zones above, so that a good share of the instants lands near one.
const TRANSITIONS = [
  "2026-03-08T07:00:00Z",
  "2026-11-01T06:00:00Z",
  "2026-03-29T01:00:00Z",
  "2026-10-25T01:00:00Z",
  "2026-04-04T15:00:00Z",
  "2026-10-03T15:30:00Z",
  "2026-04-05T03:00:00Z",
  "2026-09-06T04:00:00Z",
  "2026-04-04T14:45:00Z",
  "2026-09-26T14:00:00Z",
].map(iso);
// 2025-2028 at one-second resolution, or within a day and a half of a 2026 transition.
const instant = fc.oneof(
  fc.integer({ min: Date.UTC(2025, 0, 1) / 1000, max: Date.UTC(2028, 11, 31) / 1000 }).map((s) => s * 1000),
  fc
    .tuple(fc.constantFrom(...TRANSITIONS), fc.integer({ min: -36 * 3600, max: 36 * 3600 }))
    .map(([base, s]) => base + s * 1000),
);
const minutesOf = (q: QuietHours) => ((parseClock(q.end) as number) - (parseClock(q.start) as number) + 1440) % 1440;
const wallMinute = (ms: number, tz: string) => {
  const w = wallTime(ms, tz);
  return w.hour * 60 + w.minute;
};
const steadyAround = (ms: number, tz: string) => {
  const offset = (x: number) => {
    const w = wallTime(x, tz);
    return Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second) - Math.floor(x / 1000) * 1000;
  };
  return offset(ms - 30 * HOUR) === offset(ms + 30 * HOUR);
};

t.test("property: a window contains the instant, is contiguous, and ends outside quiet hours", async (t) => {
  fc.assert(
    fc.property(
      quiet,
      instant,
      fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 6 }),
      (q, ms, cuts) => {
        const window = quietWindowAt(ms, q);
        if (!window) return true;
        const start = window.start.getTime();
        const end = window.end.getTime();
        if (!(start <= ms && ms < end)) return false;
        // Real length: the nominal one, give or take a daylight-saving shift (at most an hour here).
        if (Math.abs(end - start - minutesOf(q) * 60_000) > HOUR) return false;
        // Every instant inside lies in the very same window.
        for (const cut of cuts) {
          const u = start + Math.floor(((end - start) * cut) / 1000) * 1000;
          const again = quietWindowAt(u, q);
          if (u < end && (again?.start.getTime() !== start || again.end.getTime() !== end)) return false;
        }
        // At the end it is over: not quiet, or the next night's window, which never starts earlier.
        const after = quietWindowAt(end, q);
        return after === null || after.start.getTime() >= end;
      },
    ),
    { numRuns: 3000 },
  );
  t.pass("held");
});

t.test("property: away from a transition, quiet means the wall clock is between start and end", async (t) => {
  fc.assert(
    fc.property(quiet, instant, (q, ms) => {
      if (!steadyAround(ms, q.tz)) return true;
      const s = parseClock(q.start) as number;
      const e = parseClock(q.end) as number;
      const m = wallMinute(ms, q.tz);
      const wallQuiet = s < e ? s <= m && m < e : m >= s || m < e;
      return (quietWindowAt(ms, q) !== null) === wallQuiet;
    }),
    { numRuns: 3000 },
  );
  t.pass("held");
});

t.test("property: in a zone without transitions, the window is exactly the wall-clock span", async (t) => {
  fc.assert(
    fc.property(quiet, instant, (q, ms) => {
      const fixed = { ...q, tz: "Asia/Kolkata" };
      const window = quietWindowAt(ms, fixed);
      const s = parseClock(q.start) as number;
      const e = parseClock(q.end) as number;
      const m = wallMinute(ms, fixed.tz);
      const wallQuiet = s < e ? s <= m && m < e : m >= s || m < e;
      if ((window !== null) !== wallQuiet) return false;
      return window === null || window.end.getTime() - window.start.getTime() === minutesOf(q) * 60_000;
    }),
    { numRuns: 2000 },
  );
  t.pass("held");
});

t.test("property: firstInstantAt lands on the asked wall time unless it was skipped", async (t) => {
  fc.assert(
    fc.property(instant, fc.integer({ min: 0, max: 1439 }), fc.constantFrom(...ZONES), (ms, minute, tz) => {
      const w = wallTime(ms, tz);
      const found = firstInstantAt(w, minute, tz).getTime();
      const landed = wallTime(found, tz);
      const sameDay = landed.year === w.year && landed.month === w.month && landed.day === w.day;
      const asked = landed.hour * 60 + landed.minute === minute && landed.second === 0;
      // Skipped: it lands at a later wall time, and one second earlier the clock was before it.
      const before = wallTime(found - 1000, tz);
      const jumped =
        landed.hour * 60 + landed.minute > minute &&
        (before.hour * 60 + before.minute < minute || before.day !== w.day);
      // The first pass: an hour earlier never shows the same wall time on that day.
      const earlier = wallTime(found - HOUR, tz);
      const first = !(earlier.day === w.day && earlier.hour * 60 + earlier.minute === minute);
      return (sameDay || landed.hour * 60 + landed.minute > minute) && (asked || jumped) && first;
    }),
    { numRuns: 3000 },
  );
  t.pass("held");
});
