#!/usr/bin/env node
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
// The script-tag build: dist/notify-inbox.js, one minified ES module with lit and
// @notify/inbox-client inside, which registers <notify-inbox> and <notify-preferences>.
// `node scripts/bundle.mjs` writes it and prints its size; `--size` fails (exit 1) when its
// gzipped size is over the budget. React is not in it: the wrapper is the ./react entry point,
// for bundlers.
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
export const ENTRY = join(here, "..", "src", "index.ts");
export const OUTFILE = join(here, "..", "dist", "notify-inbox.js");
/** The most the bundle may weigh, gzipped: 25 kB (README.md states it, test/size.test.ts holds it). */
export const BUDGET_GZIP_BYTES = 25_000;

/** Builds the bundle (to OUTFILE, or in memory with `write: false`) and measures it. */
export async function bundle({ write = true } = {}) {
  const result = await build({
    entryPoints: [ENTRY],
    outfile: OUTFILE,
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2021",
    minify: true,
    // The workspace's sources (TypeScript), as the rest of the repository loads them.
    conditions: ["@notify/source"],
    legalComments: "eof",
    write,
    logLevel: "silent",
  });
  const file = result.outputFiles?.find((f) => f.path === OUTFILE);
  const bytes = file ? Buffer.from(file.contents) : (await import("node:fs")).readFileSync(OUTFILE);
  return { bytes: bytes.length, gzipBytes: gzipSync(bytes, { level: 9 }).length, contents: bytes };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { bytes, gzipBytes } = await bundle();
  const kb = (n) => `${(n / 1000).toFixed(1)} kB`;
  console.log(`dist/notify-inbox.js: ${kb(bytes)}, ${kb(gzipBytes)} gzipped (budget ${kb(BUDGET_GZIP_BYTES)} gzipped)`);
  if (process.argv.includes("--size") && gzipBytes > BUDGET_GZIP_BYTES) {
    console.error(`over the budget by ${gzipBytes - BUDGET_GZIP_BYTES} bytes`);
    process.exit(1);
  }
}
