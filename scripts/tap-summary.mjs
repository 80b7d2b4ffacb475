#!/usr/bin/env node
// Reads TAP streams (tap --reporter=tap) and prints "N passed, N failed" over all of them,
// counting each test file's top-level subtests; a file that failed outside any subtest (a crash
// at load, a timeout) counts as one failure. Arguments: pairs of a TAP file and the exit status
// of the run that wrote it (CI runs the suite once per Node.js version).
import { readFileSync } from "node:fs";

let passed = 0;
let failed = 0;
for (let i = 2; i < process.argv.length; i += 2) {
  const before = failed;
  count(readFileSync(process.argv[i], "utf8").split("\n"));
  // The runner's own exit status wins: a failure it saw that no line shows still counts.
  if (Number(process.argv[i + 1] ?? 0) !== 0 && failed === before) failed++;
}

function count(lines) {
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
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
