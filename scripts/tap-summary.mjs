#!/usr/bin/env node
// Reads a TAP stream (tap --reporter=tap) and prints "N passed, N failed", counting each
// test file's top-level subtests; a file that failed outside any subtest (a crash at load,
// a timeout) counts as one failure.
import { readFileSync } from "node:fs";

const lines = readFileSync(process.argv[2], "utf8").split("\n");
let passed = 0;
let failed = 0;
let fileFailures = 0;
for (const line of lines) {
  if (/^ {4}ok \d+/.test(line)) passed++;
  else if (/^ {4}not ok \d+/.test(line) && !/# TODO|# SKIP/.test(line)) {
    failed++;
    fileFailures++;
  } else if (/^(not )?ok \d+/.test(line)) {
    if (line.startsWith("not ok") && fileFailures === 0) failed++;
    fileFailures = 0;
  }
}
// The runner's own exit status wins: a failure it saw that no line shows still counts.
if (Number(process.argv[3] ?? 0) !== 0 && failed === 0) failed = 1;
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
