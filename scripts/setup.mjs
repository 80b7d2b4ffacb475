#!/usr/bin/env node
// Runs before `npm start` and `npm test`: installs dependencies when they are missing or
// older than the lock file, then builds (tsc -b is incremental: quick when nothing changed) and
// bundles the inbox elements for a script tag.
import { execFileSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const npm = process.platform === "win32" ? "npm.cmd" : "npm";
const run = (cmd, args) => execFileSync(cmd, args, { cwd: root, stdio: "inherit" });

const [major, minor, patch] = process.versions.node.split(".").map(Number);
if (major < 20 || (major === 20 && (minor < 18 || (minor === 18 && patch < 1)))) {
  console.error(`notify needs Node.js 20.18.1 or newer; this is ${process.versions.node}.`);
  process.exit(1);
}

const marker = join(root, "node_modules", ".package-lock.json");
const lock = join(root, "package-lock.json");
if (!existsSync(marker) || statSync(marker).mtimeMs < statSync(lock).mtimeMs) {
  // A fresh clone installs exactly the lock (npm ci); a lock changed under an existing
  // node_modules (a pull) is applied with npm install, which keeps what is installed.
  const fresh = !existsSync(marker);
  console.log(`Installing dependencies (npm ${fresh ? "ci" : "install"})...`);
  run(npm, [fresh ? "ci" : "install", "--no-audit", "--no-fund"]);
}
run(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-b"]);
// The inbox elements' script-tag bundle (esbuild, under a second), which the inbox demo page serves.
run(process.execPath, [join(root, "libs", "inbox-elements", "scripts", "bundle.mjs")]);
