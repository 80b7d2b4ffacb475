// npm run bench:table: runs every bench that has a floor, one after another on this machine, and
// prints the README's "Performance against the floor" table from that one run: each bench's
// figure, its floor's and the ratio (floor / notify, CPU per unit of work), with the command that
// reproduces the row. Takes about 10 minutes; run it on a quiet machine. BENCH_ONLY=e2e,ingest
// runs a subset.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const benches = [
  { name: "e2e", script: "e2e.mjs" },
  { name: "processor", script: "processor.mjs" },
  { name: "receipts", script: "receipts.mjs" },
  { name: "ingest", script: "ingest.mjs", env: { BENCH_CONNECTIONS: "64" } },
  { name: "ingest", script: "ingest.mjs", env: { BENCH_CONNECTIONS: "256" } },
  { name: "delivery", script: "delivery.mjs" },
  { name: "fanout", script: "fanout.mjs" },
];
const only = process.env.BENCH_ONLY?.split(",");
const summary = join(mkdtempSync(join(tmpdir(), "notify-bench-table-")), "rows.jsonl");

for (const bench of benches.filter((b) => !only || only.includes(b.name))) {
  console.error(`running bench/${bench.script} ${JSON.stringify(bench.env ?? {})}...`);
  const run = spawnSync(process.execPath, [new URL(bench.script, import.meta.url).pathname], {
    env: { ...process.env, ...bench.env, BENCH_SUMMARY: summary },
    stdio: ["ignore", "inherit", "inherit"],
  });
  if (run.status !== 0) {
    console.error(`bench/${bench.script} failed (exit ${run.status})`);
    process.exit(1);
  }
}

const rows = readFileSync(summary, "utf8")
  .trim()
  .split("\n")
  .map((line) => JSON.parse(line));
const cells = [
  ["what", "notify", "floor", "floor / notify", "command"],
  ...rows.map((r) => [r.what, r.notify, r.floor, r.ratio.toFixed(2), `\`${r.command}\``]),
];
const widths = cells[0].map((_, i) => Math.max(...cells.map((row) => row[i].length)));
const line = (row) => `| ${row.map((cell, i) => cell.padEnd(widths[i])).join(" | ")} |`;
console.log(`\n${line(cells[0])}\n| ${widths.map((w) => "-".repeat(w)).join(" | ")} |`);
for (const row of cells.slice(1)) console.log(line(row));
