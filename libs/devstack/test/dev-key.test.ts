import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hashKey } from "@notify/core";
import { findActiveKeyByHash, seedApiKey } from "@notify/db";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import { seedDevelopment } from "../src/stack.js";

// `npm start` keeps its development key across restarts, and it opens the console: a key kept
// from before the operator scope existed is replaced, not reused.

const { url, database } = await freshDatabase(t);
const dataDir = mkdtempSync(join(tmpdir(), "notify-dev-key-"));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));

t.test("an operator key, kept across restarts", async (t) => {
  const first = await seedDevelopment(url, dataDir);
  t.match(await findActiveKeyByHash(database, hashKey(first)), { scopes: ["operator"] });
  t.equal(await seedDevelopment(url, dataDir), first, "the same key the next time");
});

t.test("a kept key without the operator scope is replaced", async (t) => {
  const old = await seedApiKey(database, { clientId: "dev", name: "development key", scopes: ["admin"] });
  writeFileSync(join(dataDir, "dev-api-key"), `${old}\n`);
  const key = await seedDevelopment(url, dataDir);
  t.not(key, old);
  t.equal(readFileSync(join(dataDir, "dev-api-key"), "utf8").trim(), key);
  t.match(await findActiveKeyByHash(database, hashKey(key)), { scopes: ["operator"] });
});
