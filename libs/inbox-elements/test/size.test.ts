import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";
import t from "tap";
import { BUDGET_GZIP_BYTES, bundle } from "../scripts/bundle.mjs";

// The script-tag bundle (lit and the client inside) stays within its budget, says so in the
// README, and carries no React; the React wrapper is a bundler's entry point of its own. The
// elements render item text as text: no directive that writes HTML is used anywhere.
const root = join(import.meta.dirname, "..");

t.test("the bundle stays within its gzipped budget, as the README states", async (t) => {
  const { bytes, gzipBytes } = await bundle({ write: false });
  t.comment(`dist/notify-inbox.js: ${bytes} bytes, ${gzipBytes} gzipped (budget ${BUDGET_GZIP_BYTES})`);
  t.ok(gzipBytes <= BUDGET_GZIP_BYTES, `${gzipBytes} bytes gzipped, at most ${BUDGET_GZIP_BYTES}`);
  const readme = readFileSync(join(root, "README.md"), "utf8");
  t.match(readme, `${BUDGET_GZIP_BYTES / 1000} kB`, "the README states the budget");
});

t.test("the bundle has no React; the ./react entry point brings the wrapper", async (t) => {
  const inputs = async (entry: string) => {
    const result = await build({
      entryPoints: [join(root, "src", entry)],
      bundle: true,
      write: false,
      metafile: true,
      format: "esm",
      platform: "browser",
      conditions: ["@notify/source"],
      external: ["react"],
      logLevel: "silent",
      outdir: "out",
    });
    const imports = Object.values(result.metafile.outputs).flatMap((output) => output.imports.map((i) => i.path));
    return [...Object.keys(result.metafile.inputs), ...imports];
  };
  const react = (file: string) => /(^|\/)(react|react-dom|@lit\/react)(\/|$)|src\/react\.ts$/.test(file);
  const main = await inputs("index.ts");
  t.notOk(main.some(react), "the main entry point imports nothing of React");
  t.ok(
    main.some((file) => /inbox-client/.test(file)),
    "it carries the client",
  );
  const wrapper = await inputs("react.ts");
  t.ok(
    wrapper.some((file) => file.includes("@lit/react")),
    "the wrapper is @lit/react's createComponent",
  );
  t.ok(wrapper.includes("react"), "and imports React, the caller's");
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  t.same(manifest.peerDependenciesMeta?.react, { optional: true }, "React is an optional peer");
  t.notOk(manifest.dependencies?.react, "never a dependency");
});

t.test("no item text is written as HTML", async (t) => {
  const sources = readdirSync(join(root, "src")).map((file) => readFileSync(join(root, "src", file), "utf8"));
  for (const pattern of [/unsafeHTML|unsafe-html|unsafeSVG/, /\.innerHTML\s*=/, /insertAdjacentHTML/]) {
    t.notOk(
      sources.some((text) => pattern.test(text)),
      `nothing matches ${pattern}`,
    );
  }
});
