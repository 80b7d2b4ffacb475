import fc from "fast-check";
import t from "tap";
import * as v from "valibot";
import { instant } from "../src/instant.js";

// The time filters of the list and dead-letter routes: an RFC 3339 timestamp naming a day the
// calendar has, read as that instant; anything else is one clear message, never a rolled-over date.
const schema = instant("since");
const pad = (n: number, width = 2) => String(n).padStart(width, "0");
const isLeap = (y: number) => y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
const days = (y: number, m: number) =>
  [31, isLeap(y) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1] as number;

t.test("a day the calendar lacks is refused with one message; every other day reads as itself", async () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 9999 }),
      fc.integer({ min: 1, max: 12 }),
      fc.integer({ min: 1, max: 31 }),
      fc.integer({ min: 0, max: 23 }),
      (year, month, day, hour) => {
        const text = `${pad(year, 4)}-${pad(month)}-${pad(day)}T${pad(hour)}:00:00Z`;
        const result = v.safeParse(schema, text);
        if (day > days(year, month)) {
          return !result.success && result.issues.length === 1 && /RFC 3339/.test(result.issues[0].message);
        }
        if (!result.success) return false;
        const d = result.output;
        return (
          d.getUTCFullYear() === year &&
          d.getUTCMonth() === month - 1 &&
          d.getUTCDate() === day &&
          d.getUTCHours() === hour
        );
      },
    ),
  );
});

t.test("the days that rolled over before", async (t) => {
  for (const text of [
    "2026-02-30T00:00:00Z",
    "2026-04-31T12:00:00+02:00",
    "2025-02-29T00:00:00Z",
    "1900-02-29T00:00:00Z",
  ]) {
    const result = v.safeParse(schema, text);
    t.notOk(result.success, text);
    t.equal(result.issues?.length, 1, `${text}: one message`);
  }
  t.ok(v.safeParse(schema, "2024-02-29T00:00:00Z").success, "a leap day is a day");
  t.ok(v.safeParse(schema, "2000-02-29T00:00:00Z").success, "so is 2000's");
  const both = v.safeParse(schema, "2026-02-30T00:00:00+99:00");
  t.equal(both.issues?.length, 1, "a bad offset on a bad day is still one message");
});
