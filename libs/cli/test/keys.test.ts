import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { hashKey } from "@notify/core";
import type { ApiKeyRecord, Database, IssuedApiKey, RotatedApiKey } from "@notify/db";
import { freshDatabase } from "@notify/testing";
import fc from "fast-check";
import t from "tap";
import { type CliDeps, UsageError } from "../src/command.js";
import { MAX_GRACE_SECONDS, parseGraceDuration } from "../src/duration.js";
import { runCli } from "./support.js";

// `notify keys ...` in process against a fresh database, and once as the built executable.
const { url, database } = await freshDatabase(t);
const deps: CliDeps = { database };

const notify = (argv: string[], options: { deps?: CliDeps } = {}) => runCli(argv, options.deps ?? deps);

const json = <T>(out: { code: number; stdout: string; stderr: string }): T => {
  if (out.code !== 0) throw new Error(`exit ${out.code}: ${out.stderr}`);
  return JSON.parse(out.stdout) as T;
};

const createArgs = (name: string, client = "shop") => [
  "keys",
  "create",
  "--name",
  name,
  "--client",
  client,
  "--scope",
  "ingest",
  "--scope",
  "read",
];

const stored = async (db: Database, id: string) =>
  (
    await db.sql<
      { key_hash: string; revoked_at: Date | null }[]
    >`select key_hash, revoked_at from api_keys where id = ${id}`
  )[0];

t.test("keys create --json prints one document with the key; the warning goes to stderr", async (t) => {
  const out = await notify([...createArgs("ci"), "--rate-burst", "10", "--rate-per-second", "5", "--json"]);
  const issued = json<IssuedApiKey>(out);
  t.match(issued, {
    id: String,
    key: /^ntf_[A-Za-z0-9_-]{43}\.[A-Za-z0-9_-]{22}$/,
    client_id: "shop",
    name: "ci",
    scopes: ["ingest", "read"],
    rate_limit: { burst: 10, per_second: 5 },
    status: "active",
  });
  t.match(out.stderr, /only time the key is shown/);
  t.notOk(out.stderr.includes(issued.key), "the key is not repeated on stderr");
  t.equal((await stored(database, issued.id))?.key_hash, hashKey(issued.key), "only the hash is stored");
});

t.test("keys create prints the key once in a table", async (t) => {
  const out = await notify(createArgs("human"));
  t.equal(out.code, 0);
  const key = /^key\s+(ntf_\S+)$/m.exec(out.stdout)?.[1];
  t.ok(key, "a key line");
  t.match(out.stdout, /^client\s+shop$/m);
  t.match(out.stdout, /^scopes\s+ingest,read$/m);
  t.match(out.stdout, /^rate limit\s+service default$/m);
  t.match(out.stderr, /only time the key is shown/);
  const [row] = await database.sql`select count(*)::int as n from api_keys where key_hash = ${hashKey(key as string)}`;
  t.equal(row?.n, 1);
});

t.test("keys list shows active keys, --all revoked ones too, --client filters", async (t) => {
  const kept = json<IssuedApiKey>(await notify([...createArgs("kept", "lister"), "--json"]));
  const gone = json<IssuedApiKey>(await notify([...createArgs("gone", "lister"), "--json"]));
  t.equal((await notify(["keys", "revoke", gone.id])).code, 0);

  const active = json<{ data: ApiKeyRecord[] }>(await notify(["keys", "list", "--client", "lister", "--json"]));
  t.same(
    active.data.map((key) => key.id),
    [kept.id],
  );
  const all = json<{ data: ApiKeyRecord[] }>(await notify(["keys", "list", "--client", "lister", "--all", "--json"]));
  t.same(
    all.data.map((key) => [key.id, key.status]),
    [
      [gone.id, "revoked"],
      [kept.id, "active"],
    ],
  );
  t.notOk(JSON.stringify(all).includes("key_hash"));

  const table = await notify(["keys", "list", "--client", "lister", "--all"]);
  t.equal(table.code, 0);
  const lines = table.stdout.trimEnd().split("\n");
  t.match(lines[0], /^ID\s+CLIENT\s+NAME\s+PREFIX\s+SCOPES\s+STATUS\s+CREATED\s+LAST USED$/);
  t.equal(lines.length, 3);
  t.match(lines[1], new RegExp(`^${gone.id}\\s+lister\\s+gone\\s+${gone.prefix}\\s+ingest,read\\s+revoked `));
  t.equal(lines[1]?.indexOf("lister"), lines[2]?.indexOf("lister"), "columns are aligned");

  const none = await notify(["keys", "list", "--client", "nobody"]);
  t.match(none.stdout, /no active keys/);
});

t.test("keys rotate issues a like key and gives the old one its grace period", async (t) => {
  const old = json<IssuedApiKey>(await notify([...createArgs("rotated"), "--json"]));
  const before = Date.now();
  const rotated = json<RotatedApiKey>(await notify(["keys", "rotate", old.id, "--grace", "90m", "--json"]));
  t.match(rotated, {
    client_id: "shop",
    name: "rotated",
    scopes: ["ingest", "read"],
    key: /^ntf_/,
    previous: { id: old.id, status: "grace" },
  });
  const until = Date.parse(rotated.previous.revoked_at as string);
  t.ok(Math.abs(until - before - 90 * 60_000) < 60_000, "the old key works for 90 minutes");
  t.equal((await stored(database, rotated.id))?.key_hash, hashKey(rotated.key));

  const human = await notify(["keys", "rotate", rotated.id]);
  t.equal(human.code, 0);
  t.match(human.stdout, new RegExp(`^replaces\\s+${rotated.id} \\(revoked `, "m"));
  t.match(human.stderr, /only time the key is shown/);
});

t.test("keys revoke revokes now; an unknown id fails with status 1", async (t) => {
  const issued = json<IssuedApiKey>(await notify([...createArgs("revoked"), "--json"]));
  const revoked = json<ApiKeyRecord>(await notify(["keys", "revoke", issued.id, "--json"]));
  t.equal(revoked.status, "revoked");
  t.ok((await stored(database, issued.id))?.revoked_at);

  const unknown = await notify(["keys", "revoke", "0197aaaa-0000-7000-8000-000000000000"]);
  t.equal(unknown.code, 1);
  t.equal(unknown.stdout, "");
  t.match(unknown.stderr, /^notify: no API key with id 0197aaaa-/);
  t.equal((await notify(["keys", "rotate", "nope"])).code, 1);
});

t.test("usage errors exit 2 with the usage text, before touching the database", async (t) => {
  const unreachable: CliDeps = {
    get database(): Database {
      throw new Error("the database was opened");
    },
  };
  const cases = [
    [],
    ["nope"],
    ["keys"],
    ["keys", "drop"],
    ["keys", "create", "--client", "shop", "--scope", "read"],
    ["keys", "create", "--name", "x", "--scope", "read"],
    ["keys", "create", "--name", "x", "--client", "has space", "--scope", "read"],
    ["keys", "create", "--name", "x", "--client", "shop"],
    ["keys", "create", "--name", "x", "--client", "shop", "--scope", "root"],
    ["keys", "create", "--name", "x", "--client", "shop", "--scope", "read", "--rate-burst", "5"],
    [
      "keys",
      "create",
      "--name",
      "x",
      "--client",
      "shop",
      "--scope",
      "read",
      "--rate-burst",
      "0",
      "--rate-per-second",
      "1",
    ],
    ["keys", "create", "--name", "--client", "shop", "--scope", "read"],
    ["keys", "create", "--nmae", "x"],
    ["keys", "create", "extra"],
    ["keys", "list", "--json", "extra"],
    ["keys", "rotate"],
    ["keys", "rotate", "a", "b"],
    ["keys", "rotate", "a", "--grace", "soon"],
    ["keys", "rotate", "a", "--grace", "8d"],
    ["keys", "revoke"],
  ];
  for (const argv of cases) {
    const out = await notify(argv, { deps: unreachable });
    t.equal(out.code, 2, argv.join(" "));
    t.match(out.stderr, /^notify: .+\n\nUsage: notify <command>/s, argv.join(" "));
    t.equal(out.stdout, "");
  }
});

t.test("help prints the usage on stdout", async (t) => {
  for (const argv of [["help"], ["--help"], ["keys", "help"], ["keys", "create", "--help"]]) {
    const out = await notify(argv);
    t.equal(out.code, 0);
    t.match(out.stdout, /^Usage: notify <command>/);
    t.match(out.stdout, /notify keys rotate ID \[--grace DURATION\]/);
  }
});

const refused = (text: string) => {
  try {
    parseGraceDuration(text);
    return false;
  } catch (error) {
    return error instanceof UsageError;
  }
};

t.test("the grace duration parser", async (t) => {
  t.equal(parseGraceDuration("24h"), 86_400);
  t.equal(parseGraceDuration("90m"), 5_400);
  t.equal(parseGraceDuration("3600"), 3_600);
  t.equal(parseGraceDuration("1d"), 86_400);
  t.equal(parseGraceDuration("0"), 0);
  const units = { s: 1, m: 60, h: 3600, d: 86_400, "": 1 } as const;
  fc.assert(
    fc.property(
      fc.nat({ max: 2 * MAX_GRACE_SECONDS }),
      fc.constantFrom<keyof typeof units>("s", "m", "h", "d", ""),
      (n, unit) => {
        const seconds = n * units[unit];
        return seconds <= MAX_GRACE_SECONDS ? parseGraceDuration(`${n}${unit}`) === seconds : refused(`${n}${unit}`);
      },
    ),
  );
  fc.assert(
    fc.property(
      fc.string().filter((text) => !/^\d+[smhd]?$/.test(text)),
      refused,
    ),
  );
  for (const garbage of ["", "-5", "1.5h", "1h30m", "5 m", "1w", "h", " 60", "8d"]) t.ok(refused(garbage), garbage);
});

t.test("the built executable", async (t) => {
  const main = fileURLToPath(new URL("../dist/main.js", import.meta.url));
  const exec = promisify(execFile);
  const { stdout, stderr } = await exec(
    process.execPath,
    [main, "keys", "create", "--name", "spawned", "--client", "shop", "--scope", "ingest", "--json"],
    { env: { PATH: process.env.PATH, DATABASE_URL: url } },
  );
  const issued = JSON.parse(stdout) as IssuedApiKey;
  t.match(issued, { name: "spawned", client_id: "shop", scopes: ["ingest"], key: /^ntf_/ });
  t.match(stderr, /only time the key is shown/);
  t.equal((await stored(database, issued.id))?.key_hash, hashKey(issued.key));

  const missing = await exec(process.execPath, [main, "keys", "list"], { env: { PATH: process.env.PATH } }).then(
    () => t.fail("should fail without DATABASE_URL"),
    (error: { code: number; stderr: string }) => error,
  );
  t.match(missing, { code: 78, stderr: /DATABASE_URL: is required/ });
});
