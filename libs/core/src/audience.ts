import { Readable } from "node:stream";
import { type CsvError, parse as parseCsv } from "csv-parse";
import { parse as parseCsvSync } from "csv-parse/sync";
import { AppError } from "./errors.js";

/** The body formats of an audience import: one member per line. */
export const MEMBER_FORMATS = ["ndjson", "csv"] as const;
export type MemberFormat = (typeof MEMBER_FORMATS)[number];

/** Members per insert statement: one unnest() round trip each, so a large import is a few statements. */
export const MEMBER_BATCH = 5000;
/** A longer line (CSV: record) is refused rather than buffered: a file without newlines must not fill memory. */
export const MAX_MEMBER_LINE_BYTES = 4096;

/** The same rule as a notification's user_id. */
const USER_ID = /^[\x21-\x7e]{1,256}$/;
const USER_ID_RULE = "user_id must be 1-256 printable ASCII characters without spaces";

const lineError = (line: number, message: string) =>
  new AppError("validation_failed", `line ${line}: ${message}`, { fields: [{ field: `line ${line}`, message }] });

/**
 * The user id on one line, or null for a line that names nobody (blank, or the CSV header).
 * NDJSON lines are a JSON string or an object with `user_id`; CSV lines take the first field.
 */
// RFC 4180 as csv-parse reads it: quoted fields may hold commas, doubled quotes and line breaks;
// rows may have any number of fields (only the first is read); a byte-order mark is dropped.
const CSV_OPTIONS = {
  bom: true,
  relax_column_count: true,
  skip_empty_lines: true,
  // csv-parse refuses a record once it holds one character more than this: MAX_MEMBER_LINE_BYTES.
  max_record_size: MAX_MEMBER_LINE_BYTES - 1,
} as const;

const CSV_ERRORS: Record<string, string> = {
  CSV_QUOTE_NOT_CLOSED: "unterminated quoted field",
  CSV_INVALID_CLOSING_QUOTE: "text after a closing quote",
  CSV_MAX_RECORD_SIZE: `longer than ${MAX_MEMBER_LINE_BYTES} bytes`,
};

const csvError = (error: unknown, line: number): AppError => {
  const { code, lines } = error as Partial<CsvError>;
  return lineError(typeof lines === "number" ? lines : line, (code !== undefined && CSV_ERRORS[code]) || "not CSV");
};

function csvRecords(text: string, line: number): string[][] {
  try {
    return parseCsvSync(text, CSV_OPTIONS) as string[][];
  } catch (error) {
    throw csvError(error, line);
  }
}

export function parseMemberLine(text: string, format: MemberFormat, line: number): string | null {
  const trimmed = text.endsWith("\r") ? text.slice(0, -1) : text;
  if (trimmed.trim() === "") return null;
  let userId: unknown;
  if (format === "ndjson") {
    let value: unknown;
    try {
      value = JSON.parse(trimmed);
    } catch {
      throw lineError(line, "not JSON");
    }
    userId = typeof value === "object" && value !== null ? (value as { user_id?: unknown }).user_id : value;
  } else {
    userId = csvRecords(trimmed, line)[0]?.[0];
    if (line === 1 && userId === "user_id") return null;
  }
  if (typeof userId !== "string" || !USER_ID.test(userId)) {
    throw lineError(line, USER_ID_RULE);
  }
  return userId;
}

/**
 * Streams member ids out of a byte stream in batches of `batchSize`, holding one batch and one
 * line at a time whatever the size of the input: the caller stores each batch before the next
 * is read, so reading follows the speed of the database. Throws on the first bad line.
 */
export async function* memberBatches(
  chunks: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>,
  format: MemberFormat,
  batchSize = MEMBER_BATCH,
): AsyncGenerator<string[]> {
  yield* format === "csv" ? csvBatches(chunks, batchSize) : ndjsonBatches(chunks, batchSize);
}

/** Decodes strictly: a byte sequence that is not UTF-8 is refused, never replaced. */
async function* utf8(
  chunks: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>,
  line: () => number,
): AsyncGenerator<string> {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  for await (const chunk of chunks) {
    try {
      yield typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true });
    } catch {
      throw lineError(line() + 1, "not UTF-8");
    }
  }
}

async function* csvBatches(
  chunks: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>,
  batchSize: number,
): AsyncGenerator<string[]> {
  let line = 0;
  let records = 0;
  let batch: string[] = [];
  // The parser is a stream: it reads ahead only to its high-water mark while a batch is stored.
  const parser = Readable.from(utf8(chunks, () => line)).pipe(parseCsv({ ...CSV_OPTIONS, info: true }));
  try {
    for await (const { record, info } of parser as AsyncIterable<{ record: string[]; info: { lines: number } }>) {
      line = info.lines;
      records++;
      const userId = record[0] ?? "";
      if (records === 1 && userId === "user_id") continue;
      if (userId.trim() === "") continue;
      if (!USER_ID.test(userId)) throw lineError(line, USER_ID_RULE);
      batch.push(userId);
      if (batch.length >= batchSize) {
        yield batch;
        batch = [];
      }
    }
  } catch (error) {
    parser.destroy();
    throw error instanceof AppError ? error : csvError(error, line + 1);
  }
  if (batch.length > 0) yield batch;
}

async function* ndjsonBatches(
  chunks: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>,
  batchSize: number,
): AsyncGenerator<string[]> {
  let pending = "";
  let line = 0;
  let batch: string[] = [];
  const take = (text: string) => {
    line++;
    const userId = parseMemberLine(text, "ndjson", line);
    if (userId !== null) batch.push(userId);
  };
  for await (const text of utf8(chunks, () => line)) {
    pending += text;
    let start = 0;
    let newline = pending.indexOf("\n");
    while (newline !== -1) {
      take(pending.slice(start, newline));
      start = newline + 1;
      newline = pending.indexOf("\n", start);
      if (batch.length >= batchSize) {
        yield batch;
        batch = [];
      }
    }
    pending = pending.slice(start);
    if (pending.length > MAX_MEMBER_LINE_BYTES) throw lineError(line + 1, `longer than ${MAX_MEMBER_LINE_BYTES} bytes`);
  }
  if (pending !== "") take(pending);
  if (batch.length > 0) yield batch;
}
