import { freshDatabase } from "@notify/testing";
import t from "tap";
import { issueKey, listAllKeys, revokeKeyById, rotateKeyById } from "../src/keys.js";

// The key verbs behind `notify keys`, against a fresh database.
const { database } = await freshDatabase(t);

t.test("listAllKeys returns every matching key across pages, newest first", async (t) => {
  const issued = [];
  // More than one page of the listing (200 a page).
  for (let i = 0; i < 205; i++)
    issued.push(await issueKey(database, { clientId: "many", name: `k${i}`, scopes: ["ingest"] }));
  await issueKey(database, { clientId: "other", name: "x", scopes: ["ingest"] });
  const keys = await listAllKeys(database, { clientId: "many" });
  t.equal(keys.length, 205);
  t.equal(new Set(keys.map((k) => k.id)).size, 205, "no key twice");
  t.ok(
    keys.every((k) => k.client_id === "many"),
    "only the client's",
  );
  t.ok((keys[0]?.created_at ?? "") >= (keys.at(-1)?.created_at ?? ""), "newest first");
  t.equal((await listAllKeys(database, {})).length, 206);
});

t.test("rotate and revoke by id; an unknown id fails", async (t) => {
  const key = await issueKey(database, { clientId: "rot", name: "r", scopes: ["admin"] });
  const rotated = await rotateKeyById(database, key.id, 60);
  t.equal(rotated.previous.id, key.id);
  t.equal(rotated.previous.status, "grace");
  t.not(rotated.key, key.key);
  const revoked = await revokeKeyById(database, rotated.id);
  t.equal(revoked.status, "revoked");
  t.same(
    (await listAllKeys(database, { clientId: "rot" })).map((k) => k.id),
    [key.id],
    "a revoked key is listed only with includeRevoked",
  );
  t.equal((await listAllKeys(database, { clientId: "rot", includeRevoked: true })).length, 2);
  await t.rejects(rotateKeyById(database, "nope", 0), /no active API key with id nope/);
  await t.rejects(revokeKeyById(database, "nope"), /no API key with id nope/);
});
