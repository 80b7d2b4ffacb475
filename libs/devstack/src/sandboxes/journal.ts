import { appendFileSync, mkdirSync, readFileSync, truncateSync } from "node:fs";
import { dirname } from "node:path";

/** One journal line: a JSON object whose `type` says what happened. */
export interface JournalEntry {
  type: string;
}

export interface Journal<T extends JournalEntry> {
  /** Every entry written by earlier runs, oldest first. */
  readonly entries: readonly T[];
  /** Writes one entry before returning; a crash after this call never loses it. */
  append(entry: T): void;
}

const isEntry = (value: unknown): value is JournalEntry =>
  typeof value === "object" && value !== null && typeof (value as { type?: unknown }).type === "string";

const parse = (line: string): JournalEntry | undefined => {
  try {
    const value: unknown = JSON.parse(line);
    return isEntry(value) ? value : undefined;
  } catch {
    return undefined;
  }
};

/**
 * Opens (or creates, with its folder) an append-only JSON Lines file. The sandboxes keep what
 * they received in one, so a dev stack killed and restarted on the same data folder still
 * knows every message it accepted.
 *
 * Each entry is written by one appendFileSync call, before the sandbox answers. The page cache
 * survives the process being killed, so no fsync: only a machine crash can tear the last line,
 * and that line is dropped at the next open (cut off the file, so the next entry starts on a
 * line of its own). Any other unreadable line is corruption, not a crash, and fails the open.
 * The file is created 0600: entries carry recipients and message bodies.
 */
export function openJournal<T extends JournalEntry>(path: string): Journal<T> {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  let content: Buffer;
  try {
    content = readFileSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    content = Buffer.alloc(0);
  }
  const entries: T[] = [];
  // Everything up to the last newline was written whole; what follows it may be torn.
  const end = content.lastIndexOf(0x0a) + 1;
  const lines = content.subarray(0, end).toString("utf8").split("\n");
  lines.pop();
  for (const [index, line] of lines.entries()) {
    if (line.trim() === "") continue;
    const entry = parse(line);
    if (entry === undefined) throw new Error(`${path}:${index + 1} is not a journal entry`);
    entries.push(entry as T);
  }
  if (end < content.length) {
    const tail = parse(content.subarray(end).toString("utf8"));
    if (tail === undefined) {
      truncateSync(path, end);
    } else {
      // Written whole but for its newline: keep it and end its line.
      entries.push(tail as T);
      appendFileSync(path, "\n");
    }
  }
  return {
    entries,
    append: (entry) => appendFileSync(path, `${JSON.stringify(entry)}\n`, { mode: 0o600 }),
  };
}
