import { createRequire } from "node:module";
import t from "tap";

// Every test file starts with the loaders of the plugins package.json's "tap" config keeps:
// TypeScript through tsx alone. On a fresh clone tap's installed build holds its default
// plugins, and a run that rebuilt it at its start still gave each test process the ts-node
// loader of the @tapjs/typescript plugin the config removes (npm test builds it first).
t.test("a test process runs without the TypeScript plugin the config leaves out", async (t) => {
  t.same(
    process.execArgv.filter((arg) => arg.includes("@tapjs/typescript")),
    [],
    "no --import of @tapjs/typescript",
  );
  const loaded = Object.keys(createRequire(import.meta.url).cache).filter((file) => /ts-node/.test(file));
  t.same(loaded, [], "no ts-node module loaded");
  t.ok(
    process.execArgv.some((arg) => /^--import=tsx$/.test(arg)),
    "tsx is the TypeScript loader",
  );
});
