import fc from "fast-check";
import t from "tap";
import {
  localDate,
  MAX_SCHEDULE_DAYS,
  parseLocalDate,
  resolveSendAtLocal,
  sendAtProblem,
  userZone,
  wallTime,
} from "../src/index.js";

// Scheduled send times: a wall-clock time in the user's zone resolved to an instant (DST-correct,
// the next one when no date is given), and the checks ingest makes on a send time.
const ZONES = [
  "UTC",
  "Europe/London",
  "America/New_York",
  "America/Sao_Paulo",
  "Australia/Lord_Howe", // a 30-minute daylight-saving shift
  "Asia/Kolkata",
  "Pacific/Chatham",
  "Pacific/Apia",
];
const clock = (minute: number) =>
  `${String(Math.floor(minute / 60)).padStart(2, "0")}:${String(minute % 60).padStart(2, "0")}`;
const wallMinute = (at: Date, tz: string) => {
  const w = wallTime(at, tz);
  return w.hour * 60 + w.minute;
};
const instant = fc.integer({ min: Date.UTC(2025, 0, 1), max: Date.UTC(2030, 0, 1) }).map((ms) => new Date(ms));
const zone = fc.constantFrom(...ZONES);
const minuteOfDay = fc.integer({ min: 0, max: 24 * 60 - 1 });

t.test("without a date: the next instant the user's clock reads the time, or the jump over it", async (t) => {
  fc.assert(
    fc.property(instant, zone, minuteOfDay, (now, tz, minute) => {
      const at = resolveSendAtLocal({ time: clock(minute) }, tz, now);
      if (at.getTime() <= now.getTime()) return false; // always ahead
      if (at.getTime() - now.getTime() > 25 * 3_600_000) return false; // within a (long) day
      if (wallMinute(at, tz) === minute && wallTime(at, tz).second === 0) return true;
      // A skipped time resolves to the jump: just before it, the clock read earlier than the time.
      const before = new Date(at.getTime() - 1000);
      return wallMinute(before, tz) < minute && wallMinute(at, tz) > minute;
    }),
    { numRuns: 3000 },
  );
});

t.test("with a date: that local date's instant, before or after now", async (t) => {
  fc.assert(
    fc.property(instant, zone, minuteOfDay, fc.integer({ min: -40, max: 400 }), (now, tz, minute, days) => {
      const date = localDate(now.getTime() + days * 86_400_000, tz);
      const at = resolveSendAtLocal({ time: clock(minute), date }, tz, now);
      return localDate(at, tz) === date && wallMinute(at, tz) >= minute;
    }),
    { numRuns: 2000 },
  );
});

t.test("daylight saving: a skipped time is the jump, a repeated one its first occurrence", async (t) => {
  const ny = "America/New_York";
  const now = new Date("2027-01-01T00:00:00Z");
  t.equal(resolveSendAtLocal({ time: "02:30", date: "2027-03-14" }, ny, now).toISOString(), "2027-03-14T07:00:00.000Z");
  t.equal(resolveSendAtLocal({ time: "01:30", date: "2027-11-07" }, ny, now).toISOString(), "2027-11-07T05:30:00.000Z");
  t.equal(resolveSendAtLocal({ time: "09:00", date: "2027-03-14" }, ny, now).toISOString(), "2027-03-14T13:00:00.000Z");
  // At 08:59 local the same day's 09:00 is next; at 09:00 exactly it has come, so tomorrow's.
  t.equal(
    resolveSendAtLocal({ time: "09:00" }, ny, new Date("2027-03-14T12:59:00Z")).toISOString(),
    "2027-03-14T13:00:00.000Z",
  );
  t.equal(
    resolveSendAtLocal({ time: "09:00" }, ny, new Date("2027-03-14T13:00:00Z")).toISOString(),
    "2027-03-15T13:00:00.000Z",
  );
});

t.test("calendar dates: only days the calendar has", async (t) => {
  t.same(parseLocalDate("2028-02-29"), { year: 2028, month: 2, day: 29 });
  for (const bad of ["2027-02-29", "2027-13-01", "2027-00-10", "2027-04-31", "27-01-01", "2027-1-1", "0000-01-01"])
    t.equal(parseLocalDate(bad), null, bad);
  fc.assert(
    fc.property(fc.integer({ min: Date.UTC(1, 0, 1), max: Date.UTC(9999, 11, 31) }), (ms) => {
      const text = new Date(ms).toISOString().slice(0, 10);
      const date = parseLocalDate(text);
      return date !== null && Date.UTC(date.year, date.month - 1, date.day) === Date.parse(`${text}T00:00:00Z`);
    }),
  );
  t.throws(() => resolveSendAtLocal({ time: "9:00" }, "UTC", new Date()), RangeError);
  t.throws(() => resolveSendAtLocal({ time: "09:00", date: "2027-02-30" }, "UTC", new Date()), RangeError);
});

t.test("a send time is refused past the horizon or at or after the deadline", async (t) => {
  const now = new Date("2027-01-01T00:00:00Z");
  const day = 86_400_000;
  t.equal(sendAtProblem(new Date(now.getTime() - day), null, now), null, "a past time goes at once");
  t.equal(sendAtProblem(new Date(now.getTime() + MAX_SCHEDULE_DAYS * day), null, now), null);
  t.match(sendAtProblem(new Date(now.getTime() + MAX_SCHEDULE_DAYS * day + 1), null, now), /at most/);
  fc.assert(
    fc.property(fc.integer({ min: -day, max: 30 * day }), fc.integer({ min: -day, max: 30 * day }), (s, d) => {
      const problem = sendAtProblem(new Date(now.getTime() + s), new Date(now.getTime() + d), now);
      return (problem === null) === s < d;
    }),
  );
  t.equal(userZone("Asia/Tokyo", "Europe/London"), "Asia/Tokyo");
  t.equal(userZone(null, "Europe/London"), "Europe/London");
  t.equal(userZone(null, null), "UTC");
});
