#!/usr/bin/env node
// Completes package-lock.json with the per-platform binaries of biome and turbo that the
// registry this lock was made against does not serve (it has the Linux ones only). npm ci
// refuses a lock that lacks an optional dependency of any platform, and `npm install` keeps
// entries it could not fetch, so after a dependency change: `node scripts/lock-platforms.mjs`.
// Entries carry os/cpu/libc, so no platform installs another's binary.
import { readFileSync, writeFileSync } from "node:fs";

const file = process.argv[2] ?? new URL("../package-lock.json", import.meta.url).pathname;
const lock = JSON.parse(readFileSync(file, "utf8"));
const add = (name, version, os, cpu, license, libc) => {
  const key = `node_modules/${name}`;
  if (lock.packages[key]) return;
  lock.packages[key] = {
    version,
    cpu: [cpu],
    dev: true,
    ...(libc ? { libc: [libc] } : {}),
    license,
    optional: true,
    os: [os],
  };
};
const biome = lock.packages["node_modules/@biomejs/biome"].version;
const turbo = lock.packages["node_modules/@turbo/linux-64"].version;
for (const [suffix, os, cpu, libc] of [
  ["android-arm64", "android", "arm64"],
  ["android-x64", "android", "x64"],
  ["darwin-arm64", "darwin", "arm64"],
  ["darwin-x64", "darwin", "x64"],
  ["linux-arm64-musl", "linux", "arm64", "musl"],
  ["linux-x64-musl", "linux", "x64", "musl"],
  ["win32-arm64", "win32", "arm64"],
  ["win32-x64", "win32", "x64"],
])
  add(`@biomejs/cli-${suffix}`, biome, os, cpu, "MIT OR Apache-2.0", libc);
for (const [suffix, os, cpu] of [
  ["darwin-64", "darwin", "x64"],
  ["darwin-arm64", "darwin", "arm64"],
  ["windows-64", "win32", "x64"],
  ["windows-arm64", "win32", "arm64"],
])
  add(`@turbo/${suffix}`, turbo, os, cpu, "MIT");
lock.packages = Object.fromEntries(
  Object.entries(lock.packages).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a < b ? -1 : a > b ? 1 : 0)),
);
writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`);
