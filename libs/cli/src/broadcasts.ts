import { setTimeout as sleep } from "node:timers/promises";
import type { BroadcastProgress } from "@notify/db";
import { broadcastProgress } from "@notify/ops";
import { type Command, type CommandGroup, type Io, parseOptions, UsageError } from "./command.js";

const WIDTH = 30;

/** One line: a bar of expanded recipients and the outcomes so far. */
export function progressLine(p: BroadcastProgress): string {
  const fraction = p.total === 0 ? 1 : Math.min(1, p.expanded / p.total);
  const filled = Math.round(fraction * WIDTH);
  const bar = `${"#".repeat(filled)}${"-".repeat(WIDTH - filled)}`;
  const percent = `${Math.floor(fraction * 100)}%`.padStart(4);
  return `[${bar}] ${percent} ${p.expanded}/${p.total} expanded · ${p.delivered} delivered · ${p.suppressed} suppressed · ${p.failed} failed · ${p.status}`;
}

const read = (deps: Parameters<Command>[2], id: string) => broadcastProgress(deps.database, id);

const print = (io: Io, json: boolean | undefined, progress: BroadcastProgress) =>
  io.stdout.write(json ? `${JSON.stringify(progress)}\n` : `${progressLine(progress)}\n`);

const show: Command = async (argv, io, deps) => {
  const { values, positionals } = parseOptions(argv, { json: { type: "boolean" } }, ["ID"]);
  print(io, values.json, await read(deps, positionals[0] as string));
};

/**
 * Redraws the bar until the broadcast is no longer expanding (or `--for` seconds passed), then
 * prints the final line. On a terminal the bar is redrawn in place; otherwise, and with --json,
 * one line per poll.
 */
const watch: Command = async (argv, io, deps) => {
  const { values, positionals } = parseOptions(
    argv,
    { interval: { type: "string" }, for: { type: "string" }, json: { type: "boolean" } },
    ["ID"],
  );
  const intervalMs = Number(values.interval ?? 1) * 1000;
  const limitMs = values.for === undefined ? Number.POSITIVE_INFINITY : Number(values.for) * 1000;
  if (!(intervalMs > 0) || !(limitMs > 0)) throw new UsageError("--interval and --for take a number of seconds");
  const inPlace = !values.json && (io.stdout as { isTTY?: boolean }).isTTY === true;
  const started = Date.now();
  for (;;) {
    const progress = await read(deps, positionals[0] as string);
    // A paused broadcast is watched on: it continues where it stopped once resumed.
    const done = !["expanding", "paused"].includes(progress.status) || Date.now() - started >= limitMs;
    if (inPlace) io.stdout.write(`\r${progressLine(progress)}${done ? "\n" : ""}`);
    else print(io, values.json, progress);
    if (done) return;
    await sleep(intervalMs);
  }
};

export const broadcasts: CommandGroup = {
  name: "broadcasts",
  usage: `Broadcasts (created with POST /api/v1/broadcasts):
  notify broadcasts show ID [--json]
      Progress: total, expanded, delivered, suppressed and failed recipients.
  notify broadcasts watch ID [--interval SECONDS] [--for SECONDS] [--json]
      A progress bar, redrawn until the broadcast has expanded or is cancelled (watched on while paused).`,
  commands: { show, watch },
};
