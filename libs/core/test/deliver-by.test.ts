import fc from "fast-check";
import t from "tap";
import { deadlineProblem, isPastDeadline, MAX_DEADLINE_SECONDS, parseRfc3339, secondsLeft } from "../src/index.js";

// Instants whose local time in any offset RFC 3339 can write (years 0001-9999).
const instant = fc.date({
  min: new Date("0002-01-01T00:00:00Z"),
  max: new Date("9998-12-31T23:59:59.999Z"),
  noInvalidDate: true,
});
const pad = (n: number, width = 2) => String(Math.abs(n)).padStart(width, "0");

t.test("an instant written in any offset reads back as the same instant", async (t) => {
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(instant, fc.integer({ min: -23 * 60 - 59, max: 23 * 60 + 59 }), (date, offset) => {
        const local = new Date(date.getTime() + offset * 60_000);
        const sign = offset < 0 ? "-" : "+";
        const text = `${pad(local.getUTCFullYear(), 4)}-${pad(local.getUTCMonth() + 1)}-${pad(local.getUTCDate())}T${pad(local.getUTCHours())}:${pad(local.getUTCMinutes())}:${pad(local.getUTCSeconds())}.${pad(local.getUTCMilliseconds(), 3)}${sign}${pad(Math.trunc(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`;
        const parsed = parseRfc3339(text);
        return parsed !== null && parsed.getTime() === date.getTime();
      }),
    ),
  );
  t.equal(parseRfc3339("2026-11-25T18:00:00Z")?.toISOString(), "2026-11-25T18:00:00.000Z");
  t.equal(parseRfc3339("2026-11-25t18:00:00.5z")?.toISOString(), "2026-11-25T18:00:00.500Z", "lower-case t and z");
  t.equal(parseRfc3339("2026-11-25T19:30:00+01:30")?.toISOString(), "2026-11-25T18:00:00.000Z");
  t.equal(parseRfc3339("2026-11-25T18:00:00.123456789Z")?.toISOString(), "2026-11-25T18:00:00.123Z");
});

t.test("what is not an RFC 3339 date-time with an offset is refused", async (t) => {
  for (const text of [
    "2026-11-25",
    "2026-11-25T18:00Z",
    "2026-11-25T18:00:00",
    "2026-11-25 18:00:00Z",
    "2026-02-30T00:00:00Z",
    "2025-02-29T00:00:00Z",
    "2026-13-01T00:00:00Z",
    "2026-11-25T24:00:00Z",
    "2026-11-25T18:60:00Z",
    "2026-11-25T18:00:00+24:00",
    "2026-11-25T18:00:00+01",
    "1764093600",
    "",
    "tomorrow",
  ]) {
    t.equal(parseRfc3339(text), null, text);
  }
  t.ok(parseRfc3339("2024-02-29T00:00:00Z"), "a leap day");
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(fc.string(), (text) => {
        const parsed = parseRfc3339(text);
        return parsed === null || Number.isFinite(parsed.getTime());
      }),
    ),
  );
});

t.test("a deadline must lie ahead, and at most 28 days out", async (t) => {
  const now = new Date("2026-11-25T12:00:00Z");
  t.equal(deadlineProblem(new Date(now.getTime() + 1), now), null);
  t.equal(deadlineProblem(new Date(now.getTime() + MAX_DEADLINE_SECONDS * 1000), now), null);
  t.equal(deadlineProblem(now, now), "must be in the future");
  t.equal(deadlineProblem(new Date(now.getTime() - 1000), now), "must be in the future");
  t.match(deadlineProblem(new Date(now.getTime() + MAX_DEADLINE_SECONDS * 1000 + 1), now), /at most 28 days/);
});

t.test("past a deadline, and the seconds left before it", async (t) => {
  const at = Date.parse("2026-11-25T12:00:00Z");
  t.equal(isPastDeadline(null, at), false, "no deadline never passes");
  t.equal(isPastDeadline(undefined, at), false);
  t.equal(isPastDeadline("2026-11-25T12:00:00.001Z", at), false);
  t.equal(isPastDeadline("2026-11-25T12:00:00.000Z", at), true, "the deadline itself is too late");
  t.equal(secondsLeft(null, at), null);
  t.equal(secondsLeft("2026-11-25T12:01:00.999Z", at), 60);
  t.equal(secondsLeft("2026-11-25T11:00:00Z", at), 0);
});
