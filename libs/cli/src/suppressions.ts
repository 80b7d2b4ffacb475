import { once } from "node:events";
import { open } from "node:fs/promises";
import { SUPPRESSIBLE_CHANNELS, SUPPRESSION_REASONS, type SuppressionEntry } from "@notify/db";
import {
  addSuppressionEntry,
  exportSuppressionsCsv,
  importSuppressionsFromFile,
  isClientId,
  isSuppressibleChannel,
  isSuppressionReason,
  noteProblem,
  pageSuppressions,
  removeSuppressionEntry,
  SUPPRESSION_CSV_COLUMNS,
  SUPPRESSION_IMPORT_BATCH,
  type SuppressionFilter,
  suppressionTarget,
} from "@notify/ops";
import { type Command, type CommandGroup, type Io, type Output, parseOptions, UsageError } from "./command.js";
import { table } from "./table.js";

const printJson = (io: Io, document: unknown) => io.stdout.write(`${JSON.stringify(document, null, 2)}\n`);
const time = (at: Date) => at.toISOString().replace(/\.\d+Z$/, "Z");
// Cells of the table are one line each, whatever a note holds.
const oneLine = (text: string) => text.replace(/\p{Cc}/gu, " ");

const CLIENT_RULE = "1-64 of A-Z, a-z, 0-9, '_', '.', ':', '-'";

function clientOption(value: string | undefined): string | undefined {
  if (value !== undefined && !isClientId(value)) throw new UsageError(`--client must be ${CLIENT_RULE}`);
  return value;
}

/** The client of an entry added or removed: --client CLIENT, or --all for every client's (''). */
function scopeOf(values: { client?: string; all?: boolean }): string {
  const client = clientOption(values.client);
  if ((client === undefined) === (values.all !== true)) {
    throw new UsageError("give --client CLIENT (that client's entry) or --all (the entry for every client)");
  }
  return client ?? "";
}

/** --channel and --reason, checked. */
function filtersOf(values: { channel?: string; reason?: string }): Omit<SuppressionFilter, "clientId"> {
  const { channel, reason } = values;
  if (channel !== undefined && !isSuppressibleChannel(channel)) {
    throw new UsageError(`--channel must be one of ${SUPPRESSIBLE_CHANNELS.join(", ")}`);
  }
  if (reason !== undefined && !isSuppressionReason(reason)) {
    throw new UsageError(`--reason must be one of ${SUPPRESSION_REASONS.join(", ")}`);
  }
  return { ...(channel === undefined ? {} : { channel }), ...(reason === undefined ? {} : { reason }) };
}

function target(channel: string, address: string) {
  const found = suppressionTarget(channel, address);
  if ("problem" in found) throw new UsageError(found.problem);
  return found;
}

/** What put the entry on the list, in a few words. */
function sourceText(entry: SuppressionEntry): string {
  const { provider, event, key_id } = entry.source;
  const parts = [provider, event, key_id === undefined ? undefined : `key ${key_id}`].filter(Boolean);
  return parts.length === 0 ? "-" : oneLine(parts.join(" "));
}

const scopeText = (entry: SuppressionEntry) => (entry.client_id === "" ? "all clients" : entry.client_id);

const rowsOf = (entries: readonly SuppressionEntry[]) => [
  ["CHANNEL", "ADDRESS", "CLIENT", "REASON", "SOURCE", "CREATED", "NOTE"],
  ...entries.map((e) => [
    e.channel,
    oneLine(e.address),
    scopeText(e),
    e.reason,
    sourceText(e),
    time(e.created_at),
    oneLine(e.source.note ?? ""),
  ]),
];

const limitOf = (value: string | undefined) => {
  if (value === undefined) return 100;
  const n = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!(n >= 1 && n <= 500)) throw new UsageError("--limit must be an integer from 1 to 500");
  return n;
};

const list: Command = async (argv, io, deps) => {
  const { values } = parseOptions(
    argv,
    {
      channel: { type: "string" },
      reason: { type: "string" },
      client: { type: "string" },
      address: { type: "string" },
      limit: { type: "string" },
      cursor: { type: "string" },
      json: { type: "boolean" },
    },
    [],
  );
  const filter: SuppressionFilter = {
    clientId: clientOption(values.client) ?? null,
    ...filtersOf(values),
    // Addresses are kept normalised: an email lower-cased, a number as +digits.
    ...(values.address === undefined ? {} : { addressPrefix: values.address.trim().toLowerCase() }),
  };
  const page = await pageSuppressions(deps.database, filter, {
    limit: limitOf(values.limit),
    ...(values.cursor === undefined ? {} : { cursor: values.cursor }),
  });
  if (values.json) {
    printJson(io, page);
    return;
  }
  if (page.data.length === 0) io.stdout.write("no suppressions\n");
  else io.stdout.write(table(rowsOf(page.data)));
  if (page.next_cursor !== null) io.stderr.write(`notify: more entries: add --cursor ${page.next_cursor}\n`);
};

/** Writes text, waiting when the output asks to (a pipe read slower than the list is). */
async function write(out: Output, text: string): Promise<void> {
  const full = out.write(text) === false;
  const emitter = out as Partial<NodeJS.EventEmitter>;
  if (full && typeof emitter.once === "function") await once(emitter as NodeJS.EventEmitter, "drain");
}

const exportList: Command = async (argv, io, deps) => {
  const { values } = parseOptions(
    argv,
    {
      client: { type: "string" },
      all: { type: "boolean" },
      channel: { type: "string" },
      reason: { type: "string" },
      out: { type: "string" },
    },
    [],
  );
  if (values.client !== undefined && values.all) throw new UsageError("give --client CLIENT or --all, not both");
  const filter: SuppressionFilter = { clientId: clientOption(values.client) ?? null, ...filtersOf(values) };
  const file = values.out === undefined ? undefined : await open(values.out, "w");
  let entries = 0;
  try {
    for await (const page of exportSuppressionsCsv(deps.database, filter)) {
      entries += page.entries;
      if (file) await file.write(page.csv);
      else await write(io.stdout, page.csv);
    }
  } finally {
    await file?.close();
  }
  io.stderr.write(`notify: exported ${entries} entries${values.out === undefined ? "" : ` to ${values.out}`}\n`);
};

const importList: Command = async (argv, io, deps) => {
  const { values, positionals } = parseOptions(
    argv,
    { client: { type: "string" }, reason: { type: "string" }, json: { type: "boolean" } },
    ["FILE"],
  );
  const clientId = clientOption(values.client);
  const { reason } = filtersOf({ reason: values.reason });
  const summary = await importSuppressionsFromFile(deps.database, positionals[0] as string, {
    ...(clientId === undefined ? {} : { clientId }),
    ...(reason === undefined ? {} : { reason }),
    onInvalid: (problem, line, lastLine) =>
      io.stderr.write(
        `notify: ${lastLine > line ? `lines ${line}-${lastLine}` : `line ${line}`}: ${oneLine(problem)} (skipped)\n`,
      ),
  });
  if (values.json) printJson(io, summary);
  else
    io.stdout.write(
      `read ${summary.read} records: ${summary.added} added, ${summary.existing} on the list already, ${summary.invalid} refused\n`,
    );
  // The good records are in; the exit status still says that some were not.
  if (summary.invalid > 0) throw new Error(`${summary.invalid} record(s) refused: see the lines above`);
};

const add: Command = async (argv, io, deps) => {
  const { values, positionals } = parseOptions(
    argv,
    {
      reason: { type: "string" },
      note: { type: "string" },
      client: { type: "string" },
      all: { type: "boolean" },
      json: { type: "boolean" },
    },
    ["CHANNEL", "ADDRESS"],
  );
  const clientId = scopeOf(values);
  const { channel, address } = target(positionals[0] as string, positionals[1] as string);
  const reason = filtersOf({ reason: values.reason }).reason ?? "manual";
  const note = values.note?.trim() ?? "";
  const problem = noteProblem(note);
  if (problem !== undefined) throw new UsageError(`--${problem}`);
  const { added, entry } = await addSuppressionEntry(deps.database, { channel, address, clientId, reason, note });
  if (values.json) printJson(io, { added, entry });
  else if (entry !== undefined) io.stdout.write(table(rowsOf([entry])));
  io.stderr.write(
    added
      ? "notify: added; sends to this address are suppressed from now on\n"
      : "notify: on the list already; the first entry is kept\n",
  );
};

const remove: Command = async (argv, io, deps) => {
  const { values, positionals } = parseOptions(
    argv,
    { client: { type: "string" }, all: { type: "boolean" }, note: { type: "string" } },
    ["CHANNEL", "ADDRESS"],
  );
  const clientId = scopeOf(values);
  const { channel, address } = target(positionals[0] as string, positionals[1] as string);
  // Checked before anything is removed, by the API's rule for a removal's note.
  const note = values.note?.trim() ?? "";
  const problem = noteProblem(note);
  if (problem !== undefined) throw new UsageError(`--${problem}`);
  const whose = clientId === "" ? "every client's" : `client ${clientId}'s`;
  if (!(await removeSuppressionEntry(deps.database, { channel, address, clientId }))) {
    throw new Error(`${channel} ${address} is not on ${whose} list`);
  }
  io.stdout.write(`removed ${channel} ${address} from ${whose} list${note ? ` (note: ${note})` : ""}\n`);
};

export const suppressions: CommandGroup = {
  name: "suppressions",
  usage: `The suppression list (addresses nothing is sent to; clients keep theirs through the API):
  notify suppressions list [--channel ${SUPPRESSIBLE_CHANNELS.join("|")}] [--reason REASON] [--client CLIENT]
                           [--address PREFIX] [--limit N] [--cursor CURSOR] [--json]
      Entries newest first (100, up to 500, a page); --client: those that hold for CLIENT (its own
      and every client's). REASON is one of ${SUPPRESSION_REASONS.join(", ")}.
  notify suppressions export [--client CLIENT | --all] [--channel CHANNEL] [--reason REASON] [--out FILE]
      The list as CSV (${SUPPRESSION_CSV_COLUMNS.join(",")}) on stdout or in FILE,
      every client's unless --client;
      a cell starting with = + - @ or a tab gets a ' before it, so spreadsheets show it as text.
  notify suppressions import FILE [--client CLIENT] [--reason REASON]
      Add the entries of a CSV with that header (channel and address are required), ${SUPPRESSION_IMPORT_BATCH}
      per insert. --client puts every entry on CLIENT's list; without it, each record's scope and
      client_id say whose list. --reason (default manual) is for records without one. A bad record
      is reported by line number and skipped; the exit status is then 1.
  notify suppressions add CHANNEL ADDRESS (--client CLIENT | --all) [--reason REASON] [--note TEXT] [--json]
      Add an entry for CLIENT, or for every client (--all); the first entry is kept.
  notify suppressions remove CHANNEL ADDRESS (--client CLIENT | --all) [--note TEXT]
      Remove CLIENT's entry, or the one for every client (--all). --note says why (at most 500
      characters, on one line); it is printed with the result, and not stored: the entry is gone.
`,
  commands: { list, export: exportList, import: importList, add, remove },
};
