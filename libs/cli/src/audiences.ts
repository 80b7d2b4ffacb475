import { MEMBER_FORMATS, type MemberFormat } from "@notify/core";
import type { AudienceRecord } from "@notify/db";
import { createEmptyAudience, findAudience, importMembersFromFile } from "@notify/ops";
import { type Command, type CommandGroup, type Io, parseOptions, UsageError } from "./command.js";
import { table } from "./table.js";

const printJson = (io: Io, document: unknown) => io.stdout.write(`${JSON.stringify(document, null, 2)}\n`);

const details = (audience: AudienceRecord) =>
  table([
    ["id", audience.id],
    ["name", audience.name],
    ["members", String(audience.member_count)],
    ["created", audience.created_at],
    ["updated", audience.updated_at],
  ]);

function formatOf(file: string, option: string | undefined): MemberFormat {
  const format = option ?? (/\.csv$/i.test(file) ? "csv" : /\.(nd)?jsonl?$/i.test(file) ? "ndjson" : undefined);
  if (format === undefined) throw new UsageError("--format ndjson|csv is required when the file name does not say");
  if (!(MEMBER_FORMATS as readonly string[]).includes(format)) throw new UsageError("--format must be ndjson or csv");
  return format as MemberFormat;
}

const create: Command = async (argv, io, deps) => {
  const { values } = parseOptions(argv, { name: { type: "string" }, json: { type: "boolean" } }, []);
  const name = values.name?.trim();
  if (!name || name.length > 200) throw new UsageError("--name is required (1-200 characters)");
  const audience = await createEmptyAudience(deps.database, name);
  if (values.json) printJson(io, audience);
  else io.stdout.write(details(audience));
};

const show: Command = async (argv, io, deps) => {
  const { values, positionals } = parseOptions(argv, { json: { type: "boolean" } }, ["ID"]);
  const audience = await findAudience(deps.database, positionals[0] as string);
  if (values.json) printJson(io, audience);
  else io.stdout.write(details(audience));
};

/** Streams the file into the audience (libs/ops audiences.ts), counting the members read on stderr. */
const importMembers: Command = async (argv, io, deps) => {
  const { values, positionals } = parseOptions(argv, { format: { type: "string" }, json: { type: "boolean" } }, [
    "ID",
    "FILE",
  ]);
  const [id, file] = positionals as [string, string];
  const format = formatOf(file, values.format);
  let read = 0;
  const summary = await importMembersFromFile(deps.database, id, file, format, (count) => {
    read = count;
    if (!values.json) io.stderr.write(`\r${read} members read`);
  });
  if (!values.json && read > 0) io.stderr.write("\n");
  if (!summary) throw new Error(`no audience ${id}`);
  if (values.json) printJson(io, summary);
  else
    io.stdout.write(
      `imported ${summary.received} lines: ${summary.added} new members, ${summary.member_count} in all\n`,
    );
};

export const audiences: CommandGroup = {
  name: "audiences",
  usage: `Audiences (the user ids broadcasts go to):
  notify audiences create --name NAME [--json]
      Create an empty audience and print its id.
  notify audiences import ID FILE [--format ndjson|csv] [--json]
      Stream members from FILE (NDJSON: a user id string or {"user_id"} per line; CSV: the user
      id in the first column, optional user_id header), 5,000 per insert. All or nothing: a bad
      line is reported by number and nothing is stored.
  notify audiences show ID [--json]
      The audience and its member count.`,
  commands: { create, import: importMembers, show },
};
