import * as v from "valibot";
import { dayExists } from "./deliver-by.js";

const EARLIEST = new Date("0001-01-01T00:00:00.000Z").getTime();
const LATEST = new Date("9999-12-31T23:59:59.998Z").getTime();

/**
 * A query's time filter: an RFC 3339 timestamp read as a Date. Its instant in UTC must fall in
 * the years 0001 to 9999 (the last millisecond excepted, so a bound one millisecond past it still
 * is one): an offset can carry 9999-12-31T23:00:00-05:00 past the year 9999 or 0000-01-01T00:00+01:00
 * before year 1, where neither Postgres' nor JetStream's timestamp parser would take it.
 */
export const instant = (field: string) => {
  const malformed = `${field} must be an RFC 3339 timestamp, e.g. 2026-11-21T00:00:00Z`;
  return v.pipe(
    v.string(),
    v.isoTimestamp(malformed),
    // The format's pattern passes days the calendar lacks, which a Date rolls over into the
    // next month (2026-02-30 read as March 2). Looked at once the format holds: one message.
    v.rawCheck(({ dataset, addIssue }) => {
      if (dataset.issues !== undefined || !dataset.typed) return;
      const s = dataset.value;
      if (!dayExists(Number(s.slice(0, 4)), Number(s.slice(5, 7)), Number(s.slice(8, 10))))
        addIssue({ message: malformed });
    }),
    v.transform((s) => new Date(s)),
    // The format's pattern passes a few strings no Date reads (an offset of "+00").
    v.check((date) => !Number.isNaN(date.getTime()), malformed),
    v.check(
      (date) => date.getTime() >= EARLIEST && date.getTime() <= LATEST,
      `${field} must fall between the years 0001 and 9999 in UTC`,
    ),
  );
};
