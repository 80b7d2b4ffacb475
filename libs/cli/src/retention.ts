import { ARCHIVE_BATCH, archiveAll, DEFAULT_RETENTION_DAYS, restoreUser } from "@notify/ops";
import { type Command, type CommandGroup, parseOptions, UsageError } from "./command.js";

function days(value: string | undefined): number {
  if (value === undefined) return DEFAULT_RETENTION_DAYS;
  const n = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!(n >= 1 && n <= 36_500)) throw new UsageError("--days must be a whole number of days, 1 or more");
  return n;
}

const run: Command = async (argv, io, deps) => {
  const { values } = parseOptions(argv, { dir: { type: "string" }, days: { type: "string" } }, []);
  if (!values.dir) throw new UsageError("--dir is required (the archive folder, ARCHIVE_DIR of the processor)");
  const archived = await archiveAll(deps.database, { dir: values.dir, days: days(values.days) });
  io.stdout.write(`archived ${archived} notifications into ${values.dir}\n`);
};

const restore: Command = async (argv, io, deps) => {
  const { values } = parseOptions(argv, { dir: { type: "string" }, user: { type: "string" } }, []);
  if (!values.dir || !values.user) throw new UsageError("--dir and --user are required");
  const restored = await restoreUser(deps.database, values.dir, values.user);
  io.stdout.write(`restored ${restored} notifications of ${values.user}\n`);
};

export const retention: CommandGroup = {
  name: "retention",
  usage: `Retention (the live log keeps ${DEFAULT_RETENTION_DAYS} days; older notifications go to gzipped NDJSON per month):
  notify retention run --dir DIR [--days N]
      Archive every notification older than N days (default ${DEFAULT_RETENTION_DAYS}) into DIR/YYYY-MM/ and
      remove it from the live log, ${ARCHIVE_BATCH} per transaction (the processor does this on a timer too).
  notify retention restore --dir DIR --user USER
      Bring a user's archived notifications back into the live log.`,
  commands: { run, restore },
};
