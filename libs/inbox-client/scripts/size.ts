import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { build } from "esbuild";

// npm run size -w @notify/inbox-client: what the package adds to a browser app: its source
// bundled with its dependency (openapi-fetch) by esbuild, minified, as ESM, and gzipped. The
// README states the figure.

const PACKAGE = join(dirname(fileURLToPath(import.meta.url)), "..");

/** The minified bundle's size, and gzipped. */
export async function bundleSize(): Promise<{ minified: number; gzipped: number }> {
  const result = await build({
    entryPoints: [join(PACKAGE, "src", "index.ts")],
    bundle: true,
    minify: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    write: false,
    logLevel: "silent",
  });
  const code = result.outputFiles[0]?.contents ?? new Uint8Array();
  return { minified: code.byteLength, gzipped: gzipSync(code, { level: 9 }).byteLength };
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { minified, gzipped } = await bundleSize();
  const kb = (bytes: number) => `${(bytes / 1000).toFixed(1)} kB`;
  process.stdout.write(`@notify/inbox-client: ${kb(minified)} minified, ${kb(gzipped)} gzipped (esbuild, ESM)\n`);
}
