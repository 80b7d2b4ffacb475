#!/usr/bin/env node
// Runs before `npm test`: builds tap's test class for the plugins package.json's "tap".plugin
// names, when the installed build is for another set (a fresh install holds tap's defaults).
// tap rebuilds it by itself at the start of a run, but that run still starts every test file
// with the node arguments of the build it loaded: on a fresh clone, the ts-node loader of the
// @tapjs/typescript plugin the config removes, besides tsx's, which makes that run about twice
// as slow.
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
// @tapjs/config, @tapjs/core and @tapjs/test come with tap (its own versions, not declared here).
import { TapConfig } from "@tapjs/config";

// @tapjs/test reads @tapjs/core as it loads and fails when it is imported first.
await import("@tapjs/core");
const { signature } = await import("@tapjs/test");
const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const config = await TapConfig.load();
if (config.pluginSignature !== signature) {
  console.log("Building tap for the configured plugins (tap build)...");
  execFileSync(process.execPath, [join(root, "node_modules", "tap", "dist", "esm", "run.mjs"), "build"], {
    cwd: root,
    stdio: "inherit",
  });
}
