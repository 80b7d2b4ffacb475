// perf script -i perf.data | node bench/perf-top.mjs [units]: where a process's CPU went, from
// Linux perf's CPU-time samples of an app or floor started with BENCH_NODE_OPTIONS=
// --perf-basic-prof-only-functions (docs/benchmarks.md#profiles). Each sample goes to the first of: the
// garbage collector (any V8 collector frame on its stack), V8's compilers, the owner of its
// innermost JavaScript frame (a package, the project's file, node's module), or else its innermost
// native frame. Prints each group's CPU (µs per unit of work when `units`, e.g. the requests
// served while perf recorded, is given; otherwise ms) and, for the JavaScript owners, their
// inclusive CPU (the samples with one of their frames anywhere on the stack).
import { createInterface } from "node:readline";

const units = Number(process.argv[2] ?? 0);
const TOP = Number(process.env.TOP ?? 30);
const GC =
  /Scavenge|Heap::|MarkCompact|GCTracer|ConcurrentMarking|Sweeper|IncrementalMarking|MinorMC|ArrayBufferSweeper|MarkingVisitor/;
const COMPILER = /compiler::|Compil|Maglev|turboshaft/;

/** The owner of a JavaScript frame (`JS:*name file:line:col`), or undefined for a native frame. */
function ownerOf(frame) {
  const file = /\bJS:\S*\s(\S+)/.exec(frame)?.[1];
  if (file === undefined) return undefined;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(file)?.[1];
  if (pkg) return pkg;
  const own = /\/((?:apps|libs)\/[^/]+)\/(?:dist|src)\/(.+?)(?::\d+)*(?:\+0x[0-9a-f]+)?$/.exec(file);
  if (own) return `${own[1]}/${own[2]}`;
  const node = /^node:((?:internal\/)?[^:]+)/.exec(file)?.[1];
  if (node) return `node:${node}`;
  return file.replace(/(:\d+)+(\+0x[0-9a-f]+)?$/, "");
}

/** The group of one sample's frames (innermost first), as said above. */
function groupOf(frames) {
  const stack = frames.join("\n");
  if (GC.test(stack)) return "(garbage collector)";
  if (COMPILER.test(stack)) return "(V8 compilers)";
  for (const frame of frames) {
    const owner = ownerOf(frame);
    if (owner !== undefined) return owner;
  }
  const symbol = /^\s*[0-9a-f]+\s+(.+?)(\+0x[0-9a-f]+)?\s+\(/.exec(frames[0] ?? "")?.[1] ?? "(unknown)";
  return `native: ${symbol.slice(0, 80)}`;
}

const exclusive = new Map();
const inclusive = new Map();
let total = 0;
let period = 0;
let frames = [];
const add = (map, key, ns) => map.set(key, (map.get(key) ?? 0) + ns);
const flush = () => {
  if (frames.length > 0) {
    add(exclusive, groupOf(frames), period);
    for (const owner of new Set(frames.map(ownerOf).filter((o) => o !== undefined))) add(inclusive, owner, period);
    total += period;
  }
  frames = [];
};
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === "") {
    flush();
    continue;
  }
  // A sample's header: "comm pid time: period event:"; its frames follow, one a line.
  const header = /^\S.*?:\s+(\d+)\s+[\w-]+:/.exec(line);
  if (header) {
    flush();
    period = Number(header[1]);
  } else {
    frames.push(line);
  }
}
flush();
const figure = (ns) => (units > 0 ? (ns / 1000 / units).toFixed(1) : (ns / 1e6).toFixed(0)).padStart(8);
const unit = units > 0 ? `µs per unit of ${units}` : "ms";
console.log(`${figure(total)}  in all (${unit})`);
const top = (map) => [...map].sort((a, b) => b[1] - a[1]).slice(0, TOP);
for (const [group, ns] of top(exclusive)) console.log(`${figure(ns)}  ${group}`);
console.log("\ninclusive, by the owner of a JavaScript frame anywhere on the stack:");
for (const [owner, ns] of top(inclusive)) console.log(`${figure(ns)}  ${owner}`);
