import { createReadStream } from "node:fs";
import { suppressionAddress } from "@notify/core";
import {
  addSuppressions,
  type Database,
  listSuppressions,
  type NewSuppression,
  removeSuppression,
  SUPPRESSIBLE_CHANNELS,
  SUPPRESSION_REASONS,
  type SuppressibleChannel,
  type SuppressionEntry,
  type SuppressionReason,
  suppressionsOf,
} from "@notify/db";
import { csvLine, csvRecords, unguardCell } from "./csv.js";

/**
 * The suppression list as an operator keeps it (`notify suppressions`): entries added and
 * removed by hand, and the list exported to CSV and imported from it. A `clientId` of '' is an
 * entry that holds for every client.
 */

/** The CSV's columns, in this order on export; an import needs channel and address only. */
export const SUPPRESSION_CSV_COLUMNS = [
  "channel",
  "address",
  "scope",
  "client_id",
  "reason",
  "created_at",
  "note",
] as const;
type Column = (typeof SUPPRESSION_CSV_COLUMNS)[number];

/** Entries per insert statement on import, and per page read on export. */
export const SUPPRESSION_IMPORT_BATCH = 5000;
const EXPORT_PAGE = 500;
/** The API's limit on a note (PUT /api/v1/suppressions/{channel}/{address}). */
export const MAX_SUPPRESSION_NOTE = 500;
// The same rule as an API key's client (apps/ingest/src/keys/schemas.ts).
const CLIENT_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/;

export const isClientId = (value: string): boolean => CLIENT_ID.test(value);

/** Why a note cannot be kept (the API's rule), or undefined when it can. */
export function noteProblem(note: string): string | undefined {
  if (note.length > MAX_SUPPRESSION_NOTE) return `note is longer than ${MAX_SUPPRESSION_NOTE} characters`;
  if (/\p{Cc}/u.test(note)) return "note must not contain control characters (line breaks, tabs)";
  return undefined;
}
export const isSuppressionReason = (value: string): value is SuppressionReason =>
  (SUPPRESSION_REASONS as readonly string[]).includes(value);
export const isSuppressibleChannel = (value: string): value is SuppressibleChannel =>
  (SUPPRESSIBLE_CHANNELS as readonly string[]).includes(value);

/** A channel and an address as the list keeps them, or why they cannot be on it. */
export function suppressionTarget(
  channel: string,
  address: string,
): { channel: SuppressibleChannel; address: string } | { problem: string } {
  if (!isSuppressibleChannel(channel)) {
    return { problem: `channel "${channel}" is none of ${SUPPRESSIBLE_CHANNELS.join(", ")}` };
  }
  const normalised = suppressionAddress(channel, address);
  if (normalised === null) {
    const kind = channel === "email" ? "an email address" : "a phone number (E.164, e.g. +14155550100)";
    return { problem: `${JSON.stringify(address)} is not ${kind}` };
  }
  return { channel, address: normalised };
}

/**
 * Adds an entry (the first entry for a channel, address and client is kept). Answers whether it
 * was added, and the entry on the list now.
 */
export async function addSuppressionEntry(
  database: Database,
  entry: { channel: SuppressibleChannel; address: string; clientId: string; reason: SuppressionReason; note?: string },
): Promise<{ added: boolean; entry: SuppressionEntry | undefined }> {
  const added = await addSuppressions(database, [
    {
      channel: entry.channel,
      address: entry.address,
      client_id: entry.clientId,
      reason: entry.reason,
      source: { event: "cli", ...(entry.note ? { note: entry.note } : {}) },
    },
  ]);
  const held = await suppressionsOf(database, entry.clientId, [entry]);
  return { added: added > 0, entry: held.find((e) => e.client_id === entry.clientId) };
}

/** Removes an entry; false when there was none. */
export const removeSuppressionEntry = (
  database: Database,
  entry: { channel: SuppressibleChannel; address: string; clientId: string },
): Promise<boolean> => removeSuppression(database, entry.channel, entry.address, entry.clientId);

export interface SuppressionFilter {
  /** A client's entries with those that hold for every client; null: every entry. */
  clientId: string | null;
  channel?: SuppressibleChannel;
  reason?: SuppressionReason;
  addressPrefix?: string;
}

/** One page of the list, newest first. */
export const pageSuppressions = (
  database: Database,
  filter: SuppressionFilter,
  page: { limit: number; cursor?: string },
) =>
  listSuppressions(database, {
    clientId: filter.clientId,
    ...(filter.channel === undefined ? {} : { channel: filter.channel }),
    ...(filter.reason === undefined ? {} : { reason: filter.reason }),
    ...(filter.addressPrefix === undefined ? {} : { address_prefix: filter.addressPrefix }),
    ...(page.cursor === undefined ? {} : { cursor: page.cursor }),
    limit: page.limit,
  });

/** An entry as a CSV record (SUPPRESSION_CSV_COLUMNS). */
export const suppressionCsvLine = (entry: SuppressionEntry): string =>
  csvLine([
    entry.channel,
    entry.address,
    entry.client_id === "" ? "all_clients" : "client",
    entry.client_id,
    entry.reason,
    entry.created_at.toISOString(),
    entry.source.note ?? "",
  ]);

/**
 * The list as CSV, newest first: the header, then a page of records at a time, each with the
 * number of entries in it. The caller writes a page before the next is read.
 */
export async function* exportSuppressionsCsv(
  database: Database,
  filter: SuppressionFilter,
): AsyncGenerator<{ csv: string; entries: number }, void, undefined> {
  yield { csv: csvLine(SUPPRESSION_CSV_COLUMNS), entries: 0 };
  let cursor: string | undefined;
  do {
    const page = await pageSuppressions(database, filter, { limit: EXPORT_PAGE, ...(cursor ? { cursor } : {}) });
    if (page.data.length > 0) yield { csv: page.data.map(suppressionCsvLine).join(""), entries: page.data.length };
    cursor = page.next_cursor ?? undefined;
  } while (cursor !== undefined);
}

export interface SuppressionImportOptions {
  /** Every record goes on this client's list (the file's scope and client_id are not read). */
  clientId?: string;
  /** The reason of a record whose reason is empty or absent (default manual). */
  reason?: SuppressionReason;
  /** Hears each record refused, with its first and last line's numbers. */
  onInvalid?: (problem: string, line: number, lastLine: number) => void;
  /** Hears the running count of records read. */
  onRead?: (read: number) => void;
  batchSize?: number;
}

export interface SuppressionImportSummary {
  /** Records read, the header not counted. */
  read: number;
  added: number;
  /** Records whose entry was on the list already (or earlier in the file). */
  existing: number;
  /** Records refused (each reported to onInvalid). */
  invalid: number;
}

/** The file's columns, by name, from its header; throws when it is not a suppression CSV's. */
function columnsOf(cells: string[], line: number): Map<Column, number> {
  const columns = new Map<Column, number>();
  const names = SUPPRESSION_CSV_COLUMNS.join(",");
  cells.forEach((cell, i) => {
    const name = cell.trim().toLowerCase() as Column;
    if (!SUPPRESSION_CSV_COLUMNS.includes(name)) {
      throw new Error(`line ${line}: the header's column "${cell}" is none of ${names}`);
    }
    if (columns.has(name)) throw new Error(`line ${line}: the header names ${name} twice`);
    columns.set(name, i);
  });
  for (const needed of ["channel", "address"] as const) {
    if (!columns.has(needed)) throw new Error(`line ${line}: the header (${names}) has no ${needed} column`);
  }
  return columns;
}

/** The client of a record's entry ('' for every client's), from its scope and client_id. */
function clientOf(scope: string, client: string): string | { problem: string } {
  if (scope === "all_clients") return client === "" ? "" : { problem: "scope all_clients takes no client_id" };
  if (scope !== "client" && scope !== "") return { problem: "scope must be client or all_clients" };
  if (client === "") return { problem: "no client_id (give one, scope all_clients, or --client)" };
  if (!isClientId(client)) return { problem: "client_id must be 1-64 of A-Z, a-z, 0-9, '_', '.', ':', '-'" };
  return client;
}

/** One record as an entry to add, or why it cannot be one. */
function entryOf(
  cells: string[],
  columns: Map<Column, number>,
  options: SuppressionImportOptions,
): NewSuppression | string {
  if (cells.length !== columns.size) return `${cells.length} fields where the header has ${columns.size}`;
  const cell = (name: Column) => {
    const at = columns.get(name);
    return at === undefined ? "" : unguardCell(cells[at] ?? "");
  };
  const target = suppressionTarget(cell("channel").trim().toLowerCase(), cell("address"));
  if ("problem" in target) return target.problem;
  const reason = cell("reason").trim() || (options.reason ?? "manual");
  if (!isSuppressionReason(reason)) return `reason must be one of ${SUPPRESSION_REASONS.join(", ")}`;
  const clientId = options.clientId ?? clientOf(cell("scope").trim(), cell("client_id").trim());
  if (typeof clientId !== "string") return clientId.problem;
  const note = cell("note").trim();
  const problem = noteProblem(note);
  if (problem !== undefined) return problem;
  return { ...target, client_id: clientId, reason, source: { event: "cli_import", ...(note ? { note } : {}) } };
}

/**
 * Streams a suppression CSV into the list, a batch per insert statement, holding one batch in
 * memory whatever the size of the file. A record that cannot be an entry is reported by line
 * number (onInvalid) and skipped; the others are added. Throws, before adding anything, when the
 * first record is not the header.
 */
export async function importSuppressionsFromFile(
  database: Database,
  file: string,
  options: SuppressionImportOptions = {},
): Promise<SuppressionImportSummary> {
  const batchSize = options.batchSize ?? SUPPRESSION_IMPORT_BATCH;
  const summary: SuppressionImportSummary = { read: 0, added: 0, existing: 0, invalid: 0 };
  let columns: Map<Column, number> | undefined;
  let batch: NewSuppression[] = [];
  const store = async () => {
    const added = await addSuppressions(database, batch);
    summary.added += added;
    summary.existing += batch.length - added;
    batch = [];
  };
  for await (const record of csvRecords(createReadStream(file))) {
    if (columns === undefined) {
      if ("error" in record) throw new Error(`line ${record.line}: ${record.error}`);
      columns = columnsOf(record.cells, record.line);
      continue;
    }
    summary.read++;
    const entry = "error" in record ? record.error : entryOf(record.cells, columns, options);
    if (typeof entry === "string") {
      summary.invalid++;
      options.onInvalid?.(entry, record.line, record.lastLine);
    } else {
      batch.push(entry);
      if (batch.length >= batchSize) await store();
    }
    if (summary.read % 1000 === 0) options.onRead?.(summary.read);
  }
  if (batch.length > 0) await store();
  options.onRead?.(summary.read);
  return summary;
}
