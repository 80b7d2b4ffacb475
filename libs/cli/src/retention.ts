import { type ArchiveLocation, ArchiveUrlError, archiveTarget, parseArchiveUrl, parseConfig } from "@notify/config";
import { isUuid } from "@notify/core";
import {
  ARCHIVE_BATCH,
  type ArchiveStore,
  archiveAll,
  DEFAULT_RETENTION_DAYS,
  openArchiveStore,
  restoreNotification,
  restoreUser,
  retirePartitions,
} from "@notify/ops";
import { type CliDeps, type Command, type CommandGroup, parseOptions, UsageError } from "./command.js";
import { ArchiveConfig } from "./config.js";

function days(value: string | undefined): number {
  if (value === undefined) return DEFAULT_RETENTION_DAYS;
  const n = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!(n >= 1 && n <= 36_500)) throw new UsageError("--days must be a whole number of days, 1 or more");
  return n;
}

const STORE_OPTIONS = { dir: { type: "string" }, url: { type: "string" } } as const;

/**
 * The archive a command works on: --dir (a folder) or --url (a folder, file:// or s3:// URL),
 * else the processor's settings (ARCHIVE_URL, else ARCHIVE_DIR). ARCHIVE_S3_ENDPOINT and
 * ARCHIVE_S3_REGION apply to an s3:// --url too; credentials come from the AWS SDK's chain.
 */
function openStore(values: { dir?: string; url?: string }, deps: CliDeps): ArchiveStore {
  const env = deps.env ?? {};
  if (values.dir !== undefined && values.url !== undefined) throw new UsageError("give --dir or --url, not both");
  if (values.dir === "" || values.url === "") throw new UsageError("--dir and --url must not be empty");
  if (values.dir === undefined && values.url === undefined && !env.ARCHIVE_URL && !env.ARCHIVE_DIR) {
    throw new UsageError(
      "--dir or --url is required (the archive: a folder or s3://bucket/prefix; or set ARCHIVE_URL or ARCHIVE_DIR as the processor has them)",
    );
  }
  let location: ArchiveLocation | undefined;
  if (values.dir !== undefined) location = { kind: "folder", path: values.dir };
  if (values.url !== undefined) {
    try {
      location = parseArchiveUrl(values.url);
    } catch (error) {
      if (error instanceof ArchiveUrlError) throw new UsageError(`--url ${error.message}`);
      throw error;
    }
  }
  // A flag's archive is used over the environment's, whose ARCHIVE_URL is then not read at all.
  const config = parseConfig(ArchiveConfig, location === undefined ? env : { ...env, ARCHIVE_URL: undefined });
  const target = archiveTarget(config, env);
  return openArchiveStore(location === undefined ? target : { ...target, location });
}

const run: Command = async (argv, io, deps) => {
  const { values } = parseOptions(argv, { ...STORE_OPTIONS, days: { type: "string" } }, []);
  const window = days(values.days);
  const store = openStore(values, deps);
  try {
    const retired = await retirePartitions(deps.database, { store, days: window });
    const archived = retired.archived + (await archiveAll(deps.database, { store, days: window }));
    io.stdout.write(
      `archived ${archived} notifications into ${store.location} (${retired.partitions} partitions of the log retired)\n`,
    );
  } finally {
    store.close();
  }
};

const restore: Command = async (argv, io, deps) => {
  const { values } = parseOptions(
    argv,
    { ...STORE_OPTIONS, user: { type: "string" }, notification: { type: "string" } },
    [],
  );
  if ((values.user === undefined) === (values.notification === undefined)) {
    throw new UsageError("give --user or --notification (one of them)");
  }
  if (values.user === "") throw new UsageError("--user must not be empty");
  if (values.notification !== undefined && !isUuid(values.notification)) {
    throw new UsageError("--notification must be a notification id (a UUID)");
  }
  const store = openStore(values, deps);
  try {
    if (values.user !== undefined) {
      const restored = await restoreUser(deps.database, store, values.user);
      io.stdout.write(`restored ${restored} notifications of ${values.user}\n`);
      return;
    }
    const id = values.notification as string;
    const result = await restoreNotification(deps.database, store, id);
    if (!result.found) throw new Error(`notification ${id} is not in the archive at ${store.location}`);
    io.stdout.write(
      result.restored ? `restored notification ${id}\n` : `notification ${id} is in the live log already\n`,
    );
  } finally {
    store.close();
  }
};

export const retention: CommandGroup = {
  name: "retention",
  usage: `Retention (the live log keeps ${DEFAULT_RETENTION_DAYS} days; older notifications go to gzipped NDJSON per day, each object with a manifest):
  notify retention run [--dir DIR | --url URL] [--days N]
      Archive every notification older than N days (default ${DEFAULT_RETENTION_DAYS}) into the archive, under
      YYYY/MM/DD/ by created_at, and remove it from the live log: each partition of the log (a day) wholly
      past the window is detached, archived and dropped at once; the few rows kept outside the partitions
      go ${ARCHIVE_BATCH} per transaction (the processor does this on a timer too). The archive: --dir (a folder), --url (a folder, file:///path or
      s3://bucket/prefix), else ARCHIVE_URL or ARCHIVE_DIR; ARCHIVE_S3_ENDPOINT and ARCHIVE_S3_REGION apply to
      s3://, credentials come from the AWS SDK's chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile).
  notify retention restore [--dir DIR | --url URL] (--user USER | --notification ID)
      Bring a user's archived notifications, or one notification, back into the live log (repeatable).
      Each object is checked against its manifest (sha256) before any of it is restored.`,
  commands: { run, restore },
};
