#!/usr/bin/env node
// tap's "after" script (package.json "tap".after): stops the supervisor of this run's own
// PostgreSQL and NATS (scripts/test-services.mjs), if the run has one, and waits until it is gone
// with them, so that nothing outlives `npm test`; servers whose supervisor was killed (this run's
// or an earlier one's) are stopped too.
import { setTimeout as sleep } from "node:timers/promises";
import { readRunState, stillRunning } from "@notify/testing/test-services";
import { clearStale } from "./test-services.mjs";

const state = readRunState(process.ppid);
if (state !== null) {
  const { supervisor, supervisorStart } = state;
  try {
    process.kill(supervisor, "SIGTERM");
  } catch {}
  for (let waited = 0; stillRunning(supervisor, supervisorStart) && waited < 60_000; waited += 100) await sleep(100);
  if (stillRunning(supervisor, supervisorStart))
    console.error(`test services: the supervisor (pid ${supervisor}) did not stop within 60 s`);
}
await clearStale();
