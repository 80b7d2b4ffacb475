import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { DB_APPS, type DbApp, dbPasswordVariable, dbRoleName } from "@notify/db";
import { ROOT } from "@notify/devstack";
import t from "tap";
import { parse } from "yaml";

// compose.yaml on Postgres: the superuser is the migrate job's alone, every app connects as the
// role of its own that the job makes (libs/db/src/setup/roles.ts; what each role may do is checked by
// libs/db/test/setup/roles.test.ts and, with the whole service running on the roles,
// postgres-roles-stack.test.ts), and every password comes from .env, which .env.example lists.

interface Service {
  command?: string[];
  environment?: Record<string, string>;
}
const text = readFileSync(join(ROOT, "compose.yaml"), "utf8");
const compose = parse(text, { merge: true }) as { services: Record<string, Service> };
const services = Object.entries(compose.services);
const postgres = compose.services.postgres as Service;
const SUPERUSER = postgres.environment?.POSTGRES_USER as string;
const DATABASE = postgres.environment?.POSTGRES_DB as string;

/** The app a service runs, from its command. */
const appOf = (s: Service) =>
  /^apps\/(ingest|processor|workers|receipts)\/dist\/main\.js$/.exec(s.command?.[1] ?? "")?.[1];
const migrates = (s: Service) => s.command?.[1] === "libs/db/dist/migrate-cli.js";

/** The user, password (as written: an interpolation) and database of a DATABASE_URL, its host and port checked. */
function connection(url: string | undefined) {
  const found = /^postgres:\/\/([^:@/]+):(\$\{[^}]+\})@postgres:5432\/([^/?]+)$/.exec(url ?? "");
  return found ? { user: found[1], password: found[2], database: found[3] } : undefined;
}
const required = (variable: string) => new RegExp(`^\\$\\{${variable}:\\?[^}]+\\}$`);

t.test("each app connects as its own role, with its own password from .env", async (t) => {
  const apps = services.filter(([, s]) => appOf(s) !== undefined);
  t.ok(apps.length >= 8, "the single node's four apps and the cluster's eight instances");
  for (const [name, s] of apps) {
    const app = appOf(s) as DbApp;
    const url = connection(s.environment?.DATABASE_URL);
    t.ok(url, `${name}: DATABASE_URL names a user and a password from .env, on the compose Postgres`);
    t.equal(url?.user, dbRoleName(app), `${name} is ${dbRoleName(app)}`);
    t.match(url?.password, required(dbPasswordVariable(app)), `${name}'s password is ${dbPasswordVariable(app)}`);
    t.equal(url?.database, DATABASE);
  }
});

t.test("only the migrate job holds the superuser, and it is given every app's password", async (t) => {
  const connecting = services.filter(([, s]) => s.environment?.DATABASE_URL !== undefined);
  const superusers = connecting.filter(([, s]) => connection(s.environment?.DATABASE_URL)?.user === SUPERUSER);
  t.same(
    superusers.map(([name]) => name),
    ["migrate"],
    "the superuser's URL is the migrate job's alone",
  );
  t.same(
    connecting.filter(([, s]) => appOf(s) === undefined && !migrates(s)).map(([name]) => name),
    [],
    "no other service connects to Postgres",
  );
  const migrate = compose.services.migrate as Service;
  t.ok(migrates(migrate), "it runs the migrations (libs/db migrate-cli)");
  t.match(connection(migrate.environment?.DATABASE_URL)?.password, required("POSTGRES_PASSWORD"));
  t.match(postgres.environment?.POSTGRES_PASSWORD, required("POSTGRES_PASSWORD"), "the server's, from .env");
  for (const app of DB_APPS) {
    t.match(
      migrate.environment?.[dbPasswordVariable(app)],
      required(dbPasswordVariable(app)),
      `${app}'s role password`,
    );
  }
  t.same(
    services.filter(
      ([name, s]) => name !== "postgres" && name !== "migrate" && "POSTGRES_PASSWORD" in (s.environment ?? {}),
    ),
    [],
    "nothing else is given the superuser's password",
  );
});

t.test("no password is written in compose.yaml; .env.example names every one .env must hold", async (t) => {
  t.notMatch(text, /postgres:\/\/[^:@/]+:[^$@/]+@/, "no literal password in any DATABASE_URL");
  const needed = [...new Set([...text.matchAll(/\$\{(\w+):\?/g)].map((m) => m[1] as string))].sort();
  for (const app of DB_APPS) t.ok(needed.includes(dbPasswordVariable(app)), `${dbPasswordVariable(app)} is required`);
  const example = readFileSync(join(ROOT, ".env.example"), "utf8");
  for (const variable of needed) t.match(example, new RegExp(`^#? ?${variable}=`, "m"), `.env.example: ${variable}`);
  t.match(readFileSync(join(ROOT, ".gitignore"), "utf8"), /^\.env$/m, ".env itself is never committed");
});

const run = promisify(execFile);
/** The migrate job's program, from source, with only `env` (and PATH). */
const migrateCli = (env: Record<string, string>) =>
  run(process.execPath, ["--conditions=@notify/source", "--import=tsx", "libs/db/src/migrate-cli.ts"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", ...env },
  }).then(
    () => ({ code: 0, stderr: "" }),
    (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
  );

t.test("the migrate job refuses some passwords without the others, or one unfit for a URL", async (t) => {
  // Refused before connecting: the URL names nothing that answers.
  const url = "postgres://postgres:unused@127.0.0.1:1/notify";
  const partial = await migrateCli({
    DATABASE_URL: url,
    [dbPasswordVariable("ingest")]: randomBytes(24).toString("hex"),
  });
  t.equal(partial.code, 78);
  t.match(partial.stderr, /every app's role password or none: NOTIFY_PROCESSOR_DB_PASSWORD/);
  const all = Object.fromEntries(DB_APPS.map((app) => [dbPasswordVariable(app), randomBytes(24).toString("hex")]));
  const unfit = await migrateCli({
    DATABASE_URL: url,
    ...all,
    [dbPasswordVariable("workers")]: "pass@word:1234567890",
  });
  t.equal(unfit.code, 78);
  t.match(unfit.stderr, /workers's password must be 16 or more/);
});
