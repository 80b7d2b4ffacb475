// node bench/profile-top.mjs <dir>: the heaviest functions (self time) of each V8 CPU profile in
// <dir> (written by `node --cpu-prof`, e.g. by BENCH_CPU_PROF_DIR=<dir> npm run bench:e2e), and
// the share of each package, to see where an app's CPU goes. For each allocation profile there
// (BENCH_ALLOC_PROF=1 as well): the bytes allocated by package, by the project's function nearest
// to the allocation (what it was for), and by allocating function.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const dir = process.argv[2];
const TOP = Number(process.env.TOP ?? 15);
if (!dir) {
  console.error("usage: node bench/profile-top.mjs <dir of .cpuprofile and .heapprofile files>");
  process.exit(2);
}
/** Where a frame's code lives: a package under node_modules, the project's own, or node itself. */
const owner = (url) => {
  if (!url) return "(native)";
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg) return pkg;
  if (url.startsWith("node:")) return "node";
  const own = /\/(apps|libs)\/([^/]+)\//.exec(url);
  return own ? `${own[1]}/${own[2]}` : url;
};
for (const file of readdirSync(dir).filter((f) => f.endsWith(".cpuprofile"))) {
  const profile = JSON.parse(readFileSync(join(dir, file), "utf8"));
  const self = new Map();
  const counts = new Map();
  for (const id of profile.samples) counts.set(id, (counts.get(id) ?? 0) + 1);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  let total = 0;
  for (const [id, n] of counts) {
    const node = byId.get(id);
    const { functionName, url, lineNumber } = node.callFrame;
    const name = `${functionName || "(anonymous)"} ${url ? `${url.replace(/^.*\/(node_modules|apps|libs)\//, "$1/")}:${lineNumber + 1}` : ""}`;
    self.set(name, (self.get(name) ?? 0) + n);
    total += n;
  }
  const idle = [...self].filter(([k]) => /^\((idle|program)\)/.test(k));
  // Shares are of the busy samples: idle and V8's "(program)" left out of the denominator, the
  // garbage collector kept in (it is work the app causes).
  const busy = total - idle.reduce((sum, [, n]) => sum + n, 0);
  const packages = new Map();
  for (const [id, n] of counts) {
    const { functionName, url } = byId.get(id).callFrame;
    if (/^\((idle|program)\)$/.test(functionName)) continue;
    const key = url ? owner(url) : functionName.startsWith("(") ? functionName : "(native)";
    packages.set(key, (packages.get(key) ?? 0) + n);
  }
  const pct = (n, of = busy) => `${((100 * n) / of).toFixed(1)}%`;
  console.log(
    `\n${file}: ${total} samples, ${busy} busy; ${idle.map(([k, n]) => `${k.trim()} ${pct(n, total)}`).join(", ")} of all`,
  );
  console.log("  by package (share of busy samples):");
  for (const [k, n] of [...packages].sort((a, b) => b[1] - a[1]).slice(0, 10))
    console.log(`    ${pct(n).padStart(6)}  ${k}`);
  console.log("  heaviest functions (self, share of busy samples):");
  for (const [k, n] of [...self]
    .sort((a, b) => b[1] - a[1])
    .filter(([k]) => !/^\((idle|program)\)/.test(k))
    .slice(0, TOP))
    console.log(`    ${pct(n).padStart(6)}  ${k}`);
}

const mb = (bytes) => `${(bytes / 1048576).toFixed(1)} MB`;
for (const file of readdirSync(dir).filter((f) => f.endsWith(".heapprofile"))) {
  const profile = JSON.parse(readFileSync(join(dir, file), "utf8"));
  const byPackage = new Map();
  const byOwn = new Map();
  const bySite = new Map();
  const add = (map, key, bytes) => map.set(key, (map.get(key) ?? 0) + bytes);
  const label = ({ functionName, url, lineNumber }) =>
    `${functionName || "(anonymous)"} ${url ? `${url.replace(/^.*\/(node_modules|apps|libs)\//, "$1/")}:${lineNumber + 1}` : ""}`;
  let total = 0;
  // Depth-first with the path kept: the nearest project frame is the last one on it.
  const walk = (node, own) => {
    const frame = node.callFrame;
    const mine = /\/(apps|libs)\//.test(frame.url) && !frame.url.includes("node_modules") ? label(frame) : own;
    if (node.selfSize > 0) {
      total += node.selfSize;
      add(byPackage, frame.url ? owner(frame.url) : "(native)", node.selfSize);
      add(byOwn, mine, node.selfSize);
      add(bySite, label(frame), node.selfSize);
    }
    for (const child of node.children ?? []) walk(child, mine);
  };
  walk(profile.head, "(no project frame)");
  const pct = (n) => `${((100 * n) / total).toFixed(1)}%`;
  console.log(`\n${file}: ${mb(total)} allocated (sampled), collected or not`);
  for (const [title, map] of [
    ["by package", byPackage],
    ["by the project's nearest function", byOwn],
    ["by allocating function", bySite],
  ]) {
    console.log(`  ${title}:`);
    for (const [k, n] of [...map].sort((a, b) => b[1] - a[1]).slice(0, TOP))
      console.log(`    ${pct(n).padStart(6)}  ${k}`);
  }
}
