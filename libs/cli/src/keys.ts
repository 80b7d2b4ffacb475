import { announceKeyChanged } from "@notify/bus";
import { SCOPES, type Scope } from "@notify/core";
import type { ApiKeyRecord, IssuedApiKey } from "@notify/db";
import { issueKey, listAllKeys, revokeKeyById, rotateKeyById } from "@notify/ops";
import { type CliDeps, type Command, type CommandGroup, type Io, parseOptions, UsageError } from "./command.js";
import { parseGraceDuration } from "./duration.js";
import { table } from "./table.js";

// The same rules as the admin API's body (apps/ingest/src/keys/schemas.ts).
const CLIENT_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/;
const MAX_NAME = 128;
const MAX_RATE = 1_000_000;

const ONCE =
  "notify: this is the only time the key is shown: store it now. A lost key cannot be recovered, only rotated.\n";

const time = (iso: string) => iso.replace(/\.\d+Z$/, "Z");

function statusText(key: ApiKeyRecord): string {
  if (key.status === "grace" && key.revoked_at) return `works until ${time(key.revoked_at)}`;
  if (key.status === "revoked" && key.revoked_at) return `revoked ${time(key.revoked_at)}`;
  return key.status;
}

const rateText = (key: ApiKeyRecord) =>
  key.rate_limit ? `burst ${key.rate_limit.burst}, ${key.rate_limit.per_second}/s` : "service default";

const details = (key: ApiKeyRecord): string[][] => [
  ["id", key.id],
  ["client", key.client_id],
  ["name", key.name],
  ["prefix", key.prefix],
  ["scopes", key.scopes.join(",")],
  ["rate limit", rateText(key)],
  ["status", statusText(key)],
  ["created", time(key.created_at)],
];

const printJson = (io: Io, document: unknown) => io.stdout.write(`${JSON.stringify(document, null, 2)}\n`);

function rate(value: string | undefined, option: string): number | undefined {
  if (value === undefined) return undefined;
  const n = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!(n >= 1 && n <= MAX_RATE)) throw new UsageError(`${option} must be an integer from 1 to ${MAX_RATE}`);
  return n;
}

function printIssued(io: Io, json: boolean | undefined, issued: IssuedApiKey, extra: string[][] = []) {
  if (json) printJson(io, issued);
  else io.stdout.write(table([...details(issued), ...extra, ["key", issued.key]]));
  io.stderr.write(ONCE);
}

const create: Command = async (argv, io, deps) => {
  const { values } = parseOptions(
    argv,
    {
      name: { type: "string" },
      client: { type: "string" },
      scope: { type: "string", multiple: true },
      "rate-burst": { type: "string" },
      "rate-per-second": { type: "string" },
      json: { type: "boolean" },
    },
    [],
  );
  const name = values.name?.trim() ?? "";
  if (name === "" || name.length > MAX_NAME || /\p{Cc}/u.test(name)) {
    throw new UsageError(`--name is required: 1-${MAX_NAME} characters without control characters`);
  }
  if (values.client === undefined || !CLIENT_ID.test(values.client)) {
    throw new UsageError("--client is required: 1-64 of A-Z, a-z, 0-9, '_', '.', ':', '-'");
  }
  const scopes = [...new Set(values.scope ?? [])];
  if (scopes.length === 0 || !scopes.every((s): s is Scope => (SCOPES as readonly string[]).includes(s))) {
    throw new UsageError(`--scope is required, once per scope, each one of ${SCOPES.join(", ")}`);
  }
  const burst = rate(values["rate-burst"], "--rate-burst");
  const perSecond = rate(values["rate-per-second"], "--rate-per-second");
  if ((burst === undefined) !== (perSecond === undefined)) {
    throw new UsageError("--rate-burst and --rate-per-second go together");
  }
  const issued = await issueKey(deps.database, {
    clientId: values.client,
    name,
    scopes,
    rateLimit: burst !== undefined && perSecond !== undefined ? { burst, perSecond } : undefined,
  });
  // Running ingest processes add it to the keys they hold in memory at once.
  await announce(deps, issued.id);
  printIssued(io, values.json, issued);
};

const list: Command = async (argv, io, deps) => {
  const { values } = parseOptions(
    argv,
    { client: { type: "string" }, all: { type: "boolean" }, json: { type: "boolean" } },
    [],
  );
  const keys = await listAllKeys(deps.database, { clientId: values.client, includeRevoked: values.all });
  if (values.json) {
    printJson(io, { data: keys });
    return;
  }
  if (keys.length === 0) {
    io.stdout.write(values.all ? "no keys\n" : "no active keys (--all lists revoked keys too)\n");
    return;
  }
  const header = ["ID", "CLIENT", "NAME", "PREFIX", "SCOPES", "STATUS", "CREATED", "LAST USED"];
  const rows = keys.map((key) => [
    key.id,
    key.client_id,
    key.name,
    key.prefix,
    key.scopes.join(","),
    statusText(key),
    time(key.created_at),
    key.last_used_at ? time(key.last_used_at) : "never",
  ]);
  io.stdout.write(table([header, ...rows]));
};

const rotate: Command = async (argv, io, deps) => {
  const { values, positionals } = parseOptions(argv, { grace: { type: "string" }, json: { type: "boolean" } }, ["ID"]);
  const id = positionals[0] as string;
  const graceSeconds = values.grace === undefined ? 0 : parseGraceDuration(values.grace);
  const rotated = await rotateKeyById(deps.database, id, graceSeconds);
  await announce(deps, id);
  await announce(deps, rotated.id);
  printIssued(io, values.json, rotated, [["replaces", `${rotated.previous.id} (${statusText(rotated.previous)})`]]);
};

const revoke: Command = async (argv, io, deps) => {
  const { values, positionals } = parseOptions(argv, { json: { type: "boolean" } }, ["ID"]);
  const id = positionals[0] as string;
  const revoked = await revokeKeyById(deps.database, id);
  let told = await announce(deps, id);
  for (const minted of revoked.cascaded) told = (await announce(deps, minted)) && told;
  if (values.json) {
    printJson(io, revoked);
    return;
  }
  io.stdout.write(table(details(revoked)));
  io.stderr.write(
    told
      ? "notify: running ingest processes were told on NATS and refuse the key now\n"
      : "notify: running ingest processes refuse the key within AUTH_CACHE_TTL_SECONDS (default 5 s)\n",
  );
};

/**
 * Tells running ingest processes on NATS (when NATS_URL is set) that the key changed: they drop
 * their cached copy and read it again into the keys they hold in memory.
 */
async function announce(deps: CliDeps, keyId: string): Promise<boolean> {
  if (!deps.bus) return false;
  try {
    return await announceKeyChanged(await deps.bus(), { key_id: keyId });
  } catch {
    return false;
  }
}

export const keys: CommandGroup = {
  name: "keys",
  usage: `API keys (plaintext keys are shown once; only their SHA-256 is stored):
  notify keys create --name NAME --client CLIENT --scope SCOPE [--scope SCOPE ...]
                     [--rate-burst N --rate-per-second N] [--json]
      Issue a key. SCOPE is one of ${SCOPES.join(", ")} (admin includes every client
      scope for its own client; operator is the deployment's: every client, dead letters, the console).
  notify keys list [--client CLIENT] [--all] [--json]
      Keys newest first; --all includes revoked keys.
  notify keys rotate ID [--grace DURATION] [--json]
      Issue a replacement with the same client, name, scopes and rate limit; the old key keeps
      working for DURATION (45s, 90m, 24h, 1d or seconds; default 0, at most 7d).
  notify keys revoke ID [--json]
      Revoke a key now, and every key minted from it through the API.
`,
  commands: { create, list, rotate, revoke },
};
