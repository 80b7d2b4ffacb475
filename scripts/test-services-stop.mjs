#!/usr/bin/env node
// tap's "after" script (package.json "tap".after): stops the PostgreSQL and NATS that
// scripts/test-services.mjs started for this run, if it started any, and waits until they are
// gone, so that nothing outlives `npm test`.
import { setTimeout as sleep } from "node:timers/promises";
import { supervisorOf } from "./test-services.mjs";

const supervisor = supervisorOf(process.ppid);
if (supervisor !== undefined) {
  const alive = () => {
    try {
      process.kill(supervisor, 0);
      return true;
    } catch {
      return false;
    }
  };
  try {
    process.kill(supervisor, "SIGTERM");
  } catch {}
  for (let waited = 0; alive() && waited < 60_000; waited += 100) await sleep(100);
  if (alive()) console.error(`test services: the supervisor (pid ${supervisor}) did not stop within 60 s`);
}
