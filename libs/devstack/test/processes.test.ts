import { readFileSync } from "node:fs";
import t from "tap";
import { APP_NODE_OPTIONS, freePort, spawnApp } from "../src/index.js";

// An app that exits during its start says why in the error the start fails with: the output of
// the stack's apps goes to a log file the test output does not show.
t.test("an app that exits before it is ready fails the start with its exit and its last output", async (t) => {
  const port = await freePort();
  const proc = spawnApp("ingest", { PORT: String(port) });
  t.teardown(() => proc.stop(2000));
  const error = await proc.ready(`http://127.0.0.1:${port}/readyz`, 20_000).then(
    () => null,
    (e: Error) => e,
  );
  t.ok(error, "ready() rejected");
  t.match(error?.message, /ingest: .*exited before it was ready/);
  t.match(error?.message, /exit code 78/, "EX_CONFIG");
  t.match(error?.message, /DATABASE_URL: is required/, "the app's own words are in the error");
});

// A bench starts the apps with a profiler's flags (which NODE_OPTIONS refuses) after their own.
t.test("an app is started with its Node.js options, then the ones it is given", async (t) => {
  const proc = spawnApp("ingest", { PORT: String(await freePort()) }, undefined, ["--stack-trace-limit=7"]);
  t.teardown(() => proc.stop(2000));
  // spawn() returns once the program is the app's: its command line is there until it exits.
  const args = readFileSync(`/proc/${proc.child.pid}/cmdline`, "utf8").split("\0");
  const entry = args.findIndex((arg) => arg.endsWith("apps/ingest/dist/main.js"));
  t.same(args.slice(1, entry), [...APP_NODE_OPTIONS, "--stack-trace-limit=7"]);
});
