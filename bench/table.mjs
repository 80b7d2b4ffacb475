// npm run bench:table: runs every bench that has a floor, one after another on this machine, and
// prints the table of docs/benchmarks.md ("Against the floors") from that one run: each bench's
// figure, its floor's and the ratio (floor / notify, CPU per unit of work), with the command that
// reproduces the row. Takes about 10 minutes; run it on a quiet machine. BENCH_ONLY=e2e,ingest
// runs a subset.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { cpuBetween, cpuTicks } from "./lib.mjs";

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

/**
 * Lets the machine settle before a bench: what the last one wrote is checkpointed now, and
 * PostgreSQL and nats-server go quiet (under 2 % of a core for a second, 60 s at most), so
 * that one bench's aftermath (a checkpoint, dropped databases and streams) is not counted in
 * the next one's first phase.
 */
async function settle() {
  const sql = postgres(process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres", {
    max: 1,
    onnotice: () => {},
  });
  await sql`checkpoint`;
  await sql.end();
  const services = ({ comm }) => (comm === "postgres" || comm === "nats-server" ? "services" : null);
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const before = cpuTicks(services);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const busy = cpuBetween(before, cpuTicks(services))?.services ?? 0;
    if (busy < 20_000) return;
  }
}

for (const bench of benches.filter((b) => !only || only.includes(b.name))) {
  await settle();
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
