import { AppError } from "./errors.js";

/** The body formats of an audience import: one member per line. */
export const MEMBER_FORMATS = ["ndjson", "csv"] as const;
export type MemberFormat = (typeof MEMBER_FORMATS)[number];

/** Members per insert statement: one unnest() round trip each (ARCHITECTURE: batch on hot paths). */
export const MEMBER_BATCH = 5000;
/** A longer line is refused rather than buffered: a file without newlines must not fill memory. */
export const MAX_MEMBER_LINE_BYTES = 4096;

/** The same rule as a notification's user_id. */
const USER_ID = /^[\x21-\x7e]{1,256}$/;

const lineError = (line: number, message: string) =>
  new AppError("validation_failed", `line ${line}: ${message}`, { fields: [{ field: `line ${line}`, message }] });

function csvFirstField(text: string, line: number): string {
  if (!text.startsWith('"')) return text.split(",", 1)[0] as string;
  let value = "";
  for (let i = 1; i < text.length; i++) {
    const char = text[i];
    if (char !== '"') {
      value += char;
      continue;
    }
    if (text[i + 1] === '"') {
      value += '"';
      i++;
      continue;
    }
    if (i + 1 < text.length && text[i + 1] !== ",") throw lineError(line, "text after a closing quote");
    return value;
  }
  throw lineError(line, "unterminated quoted field");
}

/**
 * The user id on one line, or null for a line that names nobody (blank, or the CSV header).
 * NDJSON lines are a JSON string or an object with `user_id`; CSV lines take the first field.
 */
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
    userId = csvFirstField(trimmed, line);
    if (line === 1 && userId === "user_id") return null;
  }
  if (typeof userId !== "string" || !USER_ID.test(userId)) {
    throw lineError(line, "user_id must be 1-256 printable ASCII characters without spaces");
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
  const decoder = new TextDecoder("utf-8", { fatal: true });
  let pending = "";
  let line = 0;
  let batch: string[] = [];
  const take = (text: string) => {
    line++;
    const userId = parseMemberLine(text, format, line);
    if (userId !== null) batch.push(userId);
  };
  for await (const chunk of chunks) {
    let text: string;
    try {
      text = typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true });
    } catch {
      throw lineError(line + 1, "not UTF-8");
    }
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
