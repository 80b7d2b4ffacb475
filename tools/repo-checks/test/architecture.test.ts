import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { ROOT } from "@notify/devstack";
import t from "tap";

// The repository's rooms, checked on every run: SQL lives in libs/db, NATS calls in libs/bus, and
// imports run one way (apps → libs; nothing → an app, the CLI, or the dev-only packages, but
// apps/standalone starts the four apps through their start modules).

interface Source {
  file: string;
  /** The workspace folder, e.g. "apps/ingest" or "libs/db". */
  pkg: string;
  test: boolean;
  text: string;
}

const DEV_ONLY = new Set(["libs/devstack", "libs/testing"]);

function walk(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (name === "node_modules" || name === "dist") continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, out);
    else if (/\.(ts|mts|mjs|js)$/.test(name) && !name.endsWith(".d.ts")) out.push(path);
  }
  return out;
}

function sources(): Source[] {
  const all: Source[] = [];
  for (const group of ["apps", "libs"]) {
    for (const name of readdirSync(join(ROOT, group))) {
      const pkg = `${group}/${name}`;
      for (const folder of ["src", "test"]) {
        let files: string[] = [];
        try {
          files = walk(join(ROOT, pkg, folder));
        } catch {
          continue;
        }
        for (const file of files) {
          all.push({ file: relative(ROOT, file), pkg, test: folder === "test", text: readFileSync(file, "utf8") });
        }
      }
    }
  }
  return all;
}

/** Each line of `text` matching `pattern`, as "file:line". */
const matches = (source: Source, pattern: RegExp): string[] =>
  source.text
    .split("\n")
    .flatMap((line, i) =>
      pattern.test(line) && !/^\s*(\/\/|\*)/.test(line) ? [`${source.file}:${i + 1}: ${line.trim()}`] : [],
    );

const importsOf = (source: Source): Array<{ spec: string; where: string }> =>
  source.text.split("\n").flatMap((line, i) => {
    const found = /(?:^|\s)(?:import|export)\b[^"']*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/.exec(
      line,
    );
    const spec = found?.[1] ?? found?.[2];
    return spec === undefined ? [] : [{ spec, where: `${source.file}:${i + 1}` }];
  });

const production = (s: Source) => !s.test && !DEV_ONLY.has(s.pkg);

export const SQL = /\b(sql|tx)(<[^>]*>)?`|\.unsafe\(/;
export const SQL_IMPORT = /from\s+["'](postgres|drizzle-orm(\/[^"']*)?)["']/;
export const NATS_IMPORT = /from\s+["']@nats-io\//;

const all = sources();

t.test("no SQL outside libs/db", async (t) => {
  // libs/testing creates and drops test databases: administration of the server, not data.
  const found = all
    .filter((s) => !s.test && s.pkg !== "libs/db" && s.pkg !== "libs/testing")
    .flatMap((s) => [...matches(s, SQL), ...matches(s, SQL_IMPORT)]);
  t.same(found, [], "queries belong in libs/db, as named functions");
});

t.test("no NATS client outside libs/bus", async (t) => {
  const found = all.filter((s) => production(s) && s.pkg !== "libs/bus").flatMap((s) => matches(s, NATS_IMPORT));
  t.same(found, [], "streams, consumers and KV belong in libs/bus");
});

t.test("imports run one way, and every workspace import is declared", async (t) => {
  const manifests = new Map<string, { name: string; deps: Set<string> }>();
  for (const pkg of new Set(all.map((s) => s.pkg))) {
    const manifest = JSON.parse(readFileSync(join(ROOT, pkg, "package.json"), "utf8"));
    manifests.set(pkg, {
      name: manifest.name,
      deps: new Set([
        ...Object.keys(manifest.dependencies ?? {}),
        ...Object.keys(manifest.devDependencies ?? {}),
        ...Object.keys(manifest.peerDependencies ?? {}),
      ]),
    });
  }
  const pkgOf = new Map([...manifests].map(([pkg, m]) => [m.name, pkg]));
  const wrong: string[] = [];
  for (const source of all) {
    const own = manifests.get(source.pkg);
    for (const { spec, where } of importsOf(source)) {
      if (spec.startsWith(".")) {
        const target = relative(ROOT, join(ROOT, source.file, "..", spec));
        // Tests may use the repository's own scripts (the env table generator); nothing else leaves its workspace.
        const allowed = target.startsWith(`${source.pkg}/`) || (source.test && target.startsWith("scripts/"));
        if (!allowed) wrong.push(`${where}: ${spec} reaches into another workspace`);
        continue;
      }
      const name = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : (spec.split("/")[0] as string);
      const target = pkgOf.get(name);
      if (target === undefined || target === source.pkg) continue;
      if (!own?.deps.has(name)) wrong.push(`${where}: ${name} is not declared in ${source.pkg}/package.json`);
      // The one process of all four apps (apps/standalone) starts each through its start module, nothing else of it.
      const startsAnApp = source.pkg === "apps/standalone" && /^@notify\/[a-z]+\/start$/.test(spec);
      if (target.startsWith("apps/") && !startsAnApp) wrong.push(`${where}: a package imports the app ${name}`);
      if (target === "libs/cli" && !source.test) wrong.push(`${where}: nothing but tests imports the CLI (${name})`);
      if (DEV_ONLY.has(target) && !source.test && !DEV_ONLY.has(source.pkg)) {
        wrong.push(`${where}: production code imports the dev-only ${name}`);
      }
    }
  }
  t.same(wrong, []);
});

t.test("the checks find what they look for", async (t) => {
  t.match("const rows = await sql`select 1`;", SQL);
  t.match("await tx<Row[]>`update x`", SQL);
  t.match("db.sql.unsafe(text)", SQL);
  t.notMatch("const sqlText = 'a'", SQL);
  t.match('import postgres from "postgres";', SQL_IMPORT);
  t.match('import { eq } from "drizzle-orm";', SQL_IMPORT);
  t.match('import { jetstream } from "@nats-io/jetstream";', NATS_IMPORT);
});
