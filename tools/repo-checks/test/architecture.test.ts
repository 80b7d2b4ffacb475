import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { ROOT } from "@notify/devstack";
import t from "tap";

// The repository's rooms, checked on every run: SQL lives in libs/db, NATS calls in libs/bus;
// production code imports only packages on a lower floor (LAYERS), and nothing imports an app,
// the CLI or the dev-only packages but apps/standalone (the apps' "." entry points), bench/ (an
// app's ./bench entry point), tools/ and tests; and every package says what it offers: its
// package.json names each entry point (no "./*"), each names a file that is there, its index
// exports by name (no `export *`), and nothing imports a file of another package that is not
// one of those entry points.

interface Source {
  file: string;
  /** The workspace folder ("apps/ingest", "libs/db", "tools/repo-checks"), or "bench" / "scripts". */
  pkg: string;
  test: boolean;
  text: string;
}

interface Manifest {
  name: string;
  deps: Set<string>;
  /** The subpaths of its `exports` ("." and named entry points such as "./bench"). */
  entries: string[];
  /** The source file of each entry point (its "@notify/source" condition). */
  targets: string[];
}

const DEV_ONLY = new Set(["libs/devstack", "libs/testing"]);

/**
 * The floors of the house, lowest first: production code imports only packages on a lower floor,
 * never one beside it or above it. Tests may use any package's entry points but an app's or the
 * CLI's; the dev-only packages and tools/ stand outside the floors.
 */
export const LAYERS: ReadonlyArray<readonly string[]> = [
  ["libs/core", "libs/config", "libs/telemetry", "libs/inbox-client"],
  ["libs/log"],
  ["libs/db", "libs/bus", "libs/providers"],
  ["libs/http", "libs/ops"],
  ["libs/console", "libs/cli", "libs/inbox-elements"],
  ["apps/ingest", "apps/processor", "apps/workers", "apps/receipts"],
  ["apps/standalone"],
];

const floorOf = (pkg: string): number | undefined => {
  const floor = LAYERS.findIndex((floor) => floor.includes(pkg));
  return floor === -1 ? undefined : floor;
};
/** Folders of the repository that are not workspaces but hold code: they may use any package's entry points. */
const LOOSE = ["bench", "scripts"];

function walk(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (name === "node_modules" || name === "dist") continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, out);
    else if (/\.(ts|mts|mjs|js)$/.test(name) && !name.endsWith(".d.ts")) out.push(path);
  }
  return out;
}

const WORKSPACE_GROUPS = ["apps", "libs", "tools"];

function workspaces(): string[] {
  return WORKSPACE_GROUPS.flatMap((group) => readdirSync(join(ROOT, group)).map((name) => `${group}/${name}`));
}

function sources(): Source[] {
  const all: Source[] = [];
  const add = (dir: string, pkg: string, test: boolean) => {
    let files: string[] = [];
    try {
      files = walk(join(ROOT, dir));
    } catch {
      return;
    }
    for (const file of files) {
      all.push({ file: relative(ROOT, file), pkg, test, text: readFileSync(file, "utf8") });
    }
  };
  for (const pkg of workspaces()) {
    add(`${pkg}/src`, pkg, false);
    add(`${pkg}/test`, pkg, true);
  }
  for (const folder of LOOSE) add(folder, folder, true);
  return all;
}

function manifests(): Map<string, Manifest> {
  const out = new Map<string, Manifest>();
  for (const pkg of workspaces()) {
    const manifest = JSON.parse(readFileSync(join(ROOT, pkg, "package.json"), "utf8"));
    out.set(pkg, {
      name: manifest.name,
      deps: new Set([
        ...Object.keys(manifest.dependencies ?? {}),
        ...Object.keys(manifest.devDependencies ?? {}),
        ...Object.keys(manifest.peerDependencies ?? {}),
      ]),
      entries: Object.keys(manifest.exports ?? {}),
      targets: Object.values(manifest.exports ?? {}).flatMap((entry) => {
        const source = (entry as Record<string, unknown>)["@notify/source"];
        return typeof source === "string" ? [source] : [];
      }),
    });
  }
  return out;
}

const lineAt = (text: string, index: number) => text.slice(0, index).split("\n").length;

const isComment = (line: string) => /^\s*(\/\/|\*|\/\*)/.test(line);

/** Each line of `text` matching `pattern`, as "file:line". */
const matches = (source: Source, pattern: RegExp): string[] =>
  source.text
    .split("\n")
    .flatMap((line, i) => (pattern.test(line) && !isComment(line) ? [`${source.file}:${i + 1}: ${line.trim()}`] : []));

/** Every module specifier a source imports or re-exports, multi-line import lists and dynamic imports included. */
export function importsOf(source: Pick<Source, "file" | "text">): Array<{ spec: string; where: string }> {
  const found: Array<{ spec: string; where: string }> = [];
  const pattern =
    /(?:^|[\n;])[ \t]*(?:import|export)\b(?:[^;"'`]*?\bfrom\s*)?["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/g;
  for (const match of source.text.matchAll(pattern)) {
    const spec = match[1] ?? match[2];
    const at = (match.index ?? 0) + match[0].search(/\S/);
    if (spec === undefined || isComment(source.text.slice(source.text.lastIndexOf("\n", at) + 1, at + 1))) continue;
    found.push({ spec, where: `${source.file}:${lineAt(source.text, at)}` });
  }
  return found;
}

export const SQL = /\b(sql|tx)(<[^>]*>)?`|\.unsafe\(/;
export const SQL_IMPORT = /from\s+["'](postgres|drizzle-orm(\/[^"']*)?)["']/;
export const NATS_IMPORT = /from\s+["']@nats-io\//;
export const EXPORT_STAR = /^\s*export\s+(type\s+)?\*(\s+as\s+\w+)?\s+from\b/;

/** What is wrong with the imports of `all`, given each workspace's manifest. */
export function importProblems(all: Source[], packages: Map<string, Manifest>): string[] {
  const pkgOf = new Map([...packages].map(([pkg, m]) => [m.name, pkg]));
  const wrong: string[] = [];
  for (const source of all) {
    const own = packages.get(source.pkg);
    const loose = LOOSE.includes(source.pkg);
    for (const { spec, where } of importsOf(source)) {
      if (spec.startsWith(".")) {
        const target = relative(ROOT, join(ROOT, source.file, "..", spec));
        if (!target.startsWith(`${source.pkg}/`)) wrong.push(`${where}: ${spec} reaches into another folder's files`);
        continue;
      }
      const name = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : (spec.split("/")[0] as string);
      const target = pkgOf.get(name);
      if (target === undefined) continue;
      const entry = `.${spec.slice(name.length)}`;
      if (target === source.pkg) {
        if (entry !== ".") wrong.push(`${where}: ${spec} imports its own package by name; use a relative path`);
        continue;
      }
      const manifest = packages.get(target) as Manifest;
      if (!manifest.entries.includes(entry)) {
        wrong.push(`${where}: ${spec} is not an entry point of ${name} (it offers ${manifest.entries.join(", ")})`);
      }
      if (!loose && !own?.deps.has(name)) wrong.push(`${where}: ${name} is not declared in ${source.pkg}/package.json`);
      // apps/standalone starts the four apps through their entry points; bench/ measures pieces
      // of an app through its ./bench entry point. Nothing else imports an app.
      const appAllowed =
        (source.pkg === "apps/standalone" && entry === ".") ||
        (source.pkg === "bench" && entry === "./bench") ||
        (source.pkg === "tools/repo-checks" && entry === ".");
      if (target.startsWith("apps/") && !appAllowed) wrong.push(`${where}: ${spec} imports the app ${name}`);
      if (target === "libs/cli" && !source.test && source.pkg !== "tools/repo-checks") {
        wrong.push(`${where}: nothing but tests and repository checks import the CLI (${name})`);
      }
      if (DEV_ONLY.has(target) && !source.test && !DEV_ONLY.has(source.pkg) && !source.pkg.startsWith("tools/")) {
        wrong.push(`${where}: production code imports the dev-only ${name}`);
      }
      const from = floorOf(source.pkg);
      const to = floorOf(target);
      if (!source.test && from !== undefined && to !== undefined && to >= from) {
        wrong.push(`${where}: ${source.pkg} imports ${name}, which is not on a lower floor`);
      }
    }
  }
  return wrong;
}

/** Each entry point whose source file is not there. */
export function missingEntryPoints(root: string, packages: Map<string, { entries: string[]; targets: string[] }>) {
  return [...packages].flatMap(([pkg, m]) =>
    m.targets.filter((target) => !existsSync(join(root, pkg, target))).map((target) => `${pkg}: ${target}`),
  );
}

/** Each manifest whose exports hold a pattern ("./*") instead of named entry points. */
export function exportPatternProblems(packages: Map<string, Manifest>): string[] {
  return [...packages].flatMap(([pkg, m]) =>
    m.entries.filter((entry) => entry.includes("*")).map((entry) => `${pkg}/package.json: exports "${entry}"`),
  );
}

const all = sources();
const packages = manifests();

t.test("no SQL outside libs/db", async (t) => {
  // libs/testing creates and drops test databases: administration of the server, not data.
  const found = all
    .filter((s) => WORKSPACE_GROUPS.some((g) => s.pkg.startsWith(`${g}/`)) && !s.test)
    .filter((s) => s.pkg !== "libs/db" && s.pkg !== "libs/testing")
    .flatMap((s) => [...matches(s, SQL), ...matches(s, SQL_IMPORT)]);
  t.same(found, [], "queries belong in libs/db, as named functions");
});

t.test("no NATS client outside libs/bus", async (t) => {
  const found = all
    .filter((s) => !s.test && !DEV_ONLY.has(s.pkg) && !LOOSE.includes(s.pkg) && s.pkg !== "libs/bus")
    .flatMap((s) => matches(s, NATS_IMPORT));
  t.same(found, [], "streams, consumers and KV belong in libs/bus");
});

t.test("imports run one way, through entry points, and every workspace import is declared", async (t) => {
  t.same(importProblems(all, packages), []);
});

t.test("every package names its entry points and exports by name", async (t) => {
  t.same(exportPatternProblems(packages), [], 'exports name each entry point; no "./*"');
  const stars = all.flatMap((s) => matches(s, EXPORT_STAR));
  t.same(stars, [], "an index says by name what its package offers; no `export *`");
  for (const [pkg, m] of packages) {
    if (!m.entries.includes(".") && !pkg.startsWith("tools/")) t.fail(`${pkg} has no "." entry point`);
  }
  t.same(missingEntryPoints(ROOT, packages), [], "every entry point names a file that is there");
  const floored = LAYERS.flat();
  const unplaced = [...packages.keys()].filter(
    (pkg) => !floored.includes(pkg) && !DEV_ONLY.has(pkg) && !pkg.startsWith("tools/"),
  );
  t.same(unplaced, [], "every package stands on a floor (LAYERS)");
});

t.test("the checks find what they look for", async (t) => {
  t.match("const rows = await sql`select 1`;", SQL);
  t.match("await tx<Row[]>`update x`", SQL);
  t.match("db.sql.unsafe(text)", SQL);
  t.notMatch("const sqlText = 'a'", SQL);
  t.match('import postgres from "postgres";', SQL_IMPORT);
  t.match('import { eq } from "drizzle-orm";', SQL_IMPORT);
  t.match('import { jetstream } from "@nats-io/jetstream";', NATS_IMPORT);
  t.match('export * from "./x.js";', EXPORT_STAR);
  t.match('export type * from "./x.js";', EXPORT_STAR);
  t.match('export * as x from "./x.js";', EXPORT_STAR);
  t.notMatch('export { a } from "./x.js";', EXPORT_STAR);

  const fake = (pkg: string, file: string, text: string, test = false): Source => ({ pkg, file, text, test });
  const pkgs = new Map<string, Manifest>([
    ["libs/a", { name: "@notify/a", deps: new Set(["@notify/b", "@notify/app"]), entries: ["."], targets: [] }],
    ["libs/b", { name: "@notify/b", deps: new Set(), entries: [".", "./extra"], targets: [] }],
    ["apps/app", { name: "@notify/app", deps: new Set(), entries: [".", "./bench"], targets: [] }],
    ["apps/standalone", { name: "@notify/standalone", deps: new Set(["@notify/app"]), entries: ["."], targets: [] }],
    ["libs/core", { name: "@notify/core", deps: new Set(["@notify/db"]), entries: ["."], targets: [] }],
    ["libs/db", { name: "@notify/db", deps: new Set(["@notify/core", "@notify/bus"]), entries: ["."], targets: [] }],
    ["libs/bus", { name: "@notify/bus", deps: new Set(), entries: ["."], targets: [] }],
  ]);
  const problems = (text: string, pkg = "libs/a", file = `${pkg}/src/x.ts`) =>
    importProblems([fake(pkg, file, text)], pkgs);
  t.same(problems('import { x } from "@notify/b";\nimport { y } from "@notify/b/extra";'), [], "entry points pass");
  t.match(problems('import { x } from "@notify/b/internal/file";'), [/not an entry point of @notify\/b/]);
  t.match(
    problems('import {\n  x,\n  y,\n} from "@notify/b/internal";'),
    [/x\.ts:1: .*not an entry point/],
    "multi-line",
  );
  t.match(problems('const { x } = await import("@notify/b/deep");'), [/not an entry point/], "dynamic import");
  t.match(problems('import { x } from "../../b/src/x.js";'), [/reaches into another folder/]);
  t.match(problems('import { x } from "@notify/app";'), [/imports the app/]);
  t.same(problems('import { start } from "@notify/app";', "apps/standalone"), [], "standalone starts apps");
  t.same(problems('import { f } from "@notify/app/bench";', "bench", "bench/x.mjs"), [], "a bench's own door");
  t.match(problems('import { f } from "@notify/app/start";', "bench", "bench/x.mjs"), [/not an entry point/]);
  t.same(problems('// import { x } from "@notify/b/deep";'), [], "comments are not imports");
  t.same(problems('import { x } from "@notify/core";', "libs/db"), [], "down a floor");
  t.match(problems('import { x } from "@notify/db";', "libs/core"), [/not on a lower floor/], "up a floor");
  t.match(problems('import { x } from "@notify/bus";', "libs/db"), [/not on a lower floor/], "beside");
  t.same(
    importProblems([fake("libs/core", "libs/core/test/x.test.ts", 'import { x } from "@notify/db";', true)], pkgs),
    [],
    "a test may use a package above its own",
  );
  t.same(missingEntryPoints(ROOT, new Map([["libs/core", { entries: ["."], targets: ["./src/index.ts"] }]])), []);
  t.same(missingEntryPoints(ROOT, new Map([["libs/core", { entries: ["."], targets: ["./src/gone.ts"] }]])), [
    "libs/core: ./src/gone.ts",
  ]);
  t.same(
    exportPatternProblems(
      new Map([["libs/z", { name: "@notify/z", deps: new Set(), entries: [".", "./*"], targets: [] }]]),
    ),
    ['libs/z/package.json: exports "./*"'],
  );
});
