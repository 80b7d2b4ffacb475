// npm run bench:table: runs every bench that has a floor on this machine, BENCH_REPEAT times (5)
// in each database state (BENCH_DB_STATE: fresh, then history; one of them if set), and prints
// the table of docs/benchmarks.md ("Latest results"): for each figure and state, the median
// of its runs with their min-max, notify's and its floor's (measured in the same runs), and the
// ratio floor / notify in CPU per unit of work as the median of the runs' own ratios. A run's
// figures are never picked: a target is met when the median meets it. Every bench at its
// defaults takes several hours on a 2-core machine (bench:e2e about six minutes a run); run it on
// a quiet machine. BENCH_ONLY=e2e,ingest runs a subset. The benches' own variables (BENCH_EMAILS,
// BENCH_SECONDS, ...) pass through to every run and shorten it.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { cpuBetween, cpuTicks, DB_STATES } from "./lib.mjs";

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
const REPEAT = Math.max(1, Number(process.env.BENCH_REPEAT ?? 5));
const states = process.env.BENCH_DB_STATE ? [process.env.BENCH_DB_STATE] : DB_STATES;
for (const state of states) if (!DB_STATES.includes(state)) throw new Error(`unknown BENCH_DB_STATE ${state}`);
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

// Each state's runs take turns bench by bench, so that a slow stretch of the machine's day falls
// on one run of every bench rather than on every run of one.
for (const state of states) {
  for (let run = 1; run <= REPEAT; run++) {
    for (const bench of benches.filter((b) => !only || only.includes(b.name))) {
      await settle();
      console.error(`[${state} ${run}/${REPEAT}] running bench/${bench.script} ${JSON.stringify(bench.env ?? {})}...`);
      const child = spawnSync(process.execPath, [new URL(bench.script, import.meta.url).pathname], {
        env: { ...process.env, ...bench.env, BENCH_DB_STATE: state, BENCH_SUMMARY: summary },
        stdio: ["ignore", "inherit", "inherit"],
      });
      if (child.status !== 0) {
        console.error(`bench/${bench.script} failed (exit ${child.status})`);
        process.exit(1);
      }
    }
  }
}

const rows = readFileSync(summary, "utf8")
  .trim()
  .split("\n")
  .map((line) => JSON.parse(line));

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
/** The median of `values` with their min-max in brackets, each as `format` writes it, then `unit`. */
const spread = (values, format, unit = "") => {
  const known = values.filter((v) => typeof v === "number" && Number.isFinite(v));
  if (known.length === 0) return "-";
  return `${format(median(known))} (${format(Math.min(...known))}-${format(Math.max(...known))})${unit}`;
};
const ms = (us) => (us / 1000).toFixed(2);
const perSecond = (n) => Math.round(n).toLocaleString("en").replaceAll(",", " ");
/** CPU per unit (ms) and rate of a set of runs' `{ cpuUs, rate }`, each as its median and min-max. */
const figures = (runs) =>
  [
    runs.some((r) => r?.cpuUs !== undefined)
      ? spread(
          runs.map((r) => r?.cpuUs),
          ms,
          " ms CPU",
        )
      : null,
    runs.some((r) => r?.rate !== undefined)
      ? spread(
          runs.map((r) => r?.rate),
          perSecond,
          "/s",
        )
      : null,
  ]
    .filter(Boolean)
    .join(", ");

// One line per figure and state, in the order the benches first wrote them.
const groups = new Map();
for (const row of rows) {
  const key = `${row.what}\u0000${row.state}`;
  if (!groups.has(key)) groups.set(key, []);
  groups.get(key).push(row);
}
const cells = [
  ["what", "database", "runs", "notify", "floor (same runs)", "floor / notify", "command"],
  ...[...groups.values()].map((runs) => {
    const extras = [...new Set(runs.flatMap((r) => Object.keys(r.extra ?? {})))];
    const floor = [
      figures(runs.map((r) => r.floor)),
      ...extras.map((name) => `${name}: ${figures(runs.map((r) => r.extra?.[name]))}`),
    ].join("; ");
    return [
      runs[0].what,
      runs[0].state,
      String(runs.length),
      figures(runs.map((r) => r.notify)),
      floor,
      spread(
        runs.map((r) => r.ratio),
        (v) => v.toFixed(2),
      ),
      `\`BENCH_DB_STATE=${runs[0].state} ${runs[0].command}\``,
    ];
  }),
];
const widths = cells[0].map((_, i) => Math.max(...cells.map((row) => row[i].length)));
const line = (row) => `| ${row.map((cell, i) => cell.padEnd(widths[i])).join(" | ")} |`;
console.log(
  `\nmedians of ${REPEAT} runs a state, min-max in brackets; a ratio is the median of the runs' ratios (${new Date().toISOString().slice(0, 10)})`,
);
console.log(`${line(cells[0])}\n| ${widths.map((w) => "-".repeat(w)).join(" | ")} |`);
for (const row of cells.slice(1)) console.log(line(row));
