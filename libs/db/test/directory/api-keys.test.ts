import { hashKey } from "@notify/core";
import { freshDatabase } from "@notify/testing";
import t from "tap";
import {
  createKey,
  findActiveKeyByHash,
  InactiveMinterError,
  revokeKey,
  rotateKey,
  touchKeyLastUsed,
} from "../../src/index.js";

// The authentication lookup: a key authenticates until its revocation takes effect, by the
// database clock, so a rotated key keeps working through its grace period and no longer.
const { database } = await freshDatabase(t);

t.test("active, in grace and revoked keys", async (t) => {
  const issued = await createKey(database, {
    clientId: "c1",
    name: "backend",
    scopes: ["ingest"],
    rateLimit: { burst: 5, perSecond: 2 },
  });
  const found = await findActiveKeyByHash(database, hashKey(issued.key));
  t.match(found, {
    id: issued.id,
    client_id: "c1",
    scopes: ["ingest"],
    revoked_at: null,
    rate_limit_burst: 5,
    rate_limit_per_second: 2,
  });
  t.equal(await findActiveKeyByHash(database, hashKey("ntk_unknown")), null);

  const rotated = await rotateKey(database, issued.id, { graceSeconds: 3600 });
  const inGrace = await findActiveKeyByHash(database, hashKey(issued.key));
  t.ok(inGrace, "a rotated key still authenticates in its grace period");
  t.ok(inGrace?.revoked_at instanceof Date && inGrace.revoked_at.getTime() > Date.now(), "with its end");
  t.ok(await findActiveKeyByHash(database, hashKey(rotated?.key as string)), "so does its replacement");

  await revokeKey(database, issued.id);
  t.equal(await findActiveKeyByHash(database, hashKey(issued.key)), null, "revoked: no longer");
});

t.test("use is recorded", async (t) => {
  const issued = await createKey(database, { clientId: "c2", name: "k", scopes: ["admin"] });
  t.equal(issued.last_used_at, null);
  await touchKeyLastUsed(database, issued.id);
  const [row] = await database.sql<{ last_used_at: Date | null }[]>`
    select last_used_at from api_keys where id = ${issued.id}`;
  t.ok(row?.last_used_at instanceof Date);
});

t.test("a revocation reaches every key minted from the revoked one, and nothing else", async (t) => {
  const active = async (key: string) => (await findActiveKeyByHash(database, hashKey(key))) !== null;
  const root = await createKey(database, { clientId: "lin", name: "root", scopes: ["admin"] });
  const child = await createKey(database, { clientId: "lin", name: "child", scopes: ["admin"], mintedBy: root.id });
  const grandchild = await createKey(database, { clientId: "lin", name: "gc", scopes: ["read"], mintedBy: child.id });
  const sibling = await createKey(database, { clientId: "lin", name: "sibling", scopes: ["read"] });
  t.equal(child.minted_by, root.id, "a key records its minter");
  // The child rotates itself: the replacement is the child's, and so is the grandchild now.
  const rotated = await rotateKey(database, child.id, { graceSeconds: 60, by: { keyId: child.id } });
  t.equal(rotated?.minted_by, child.id, "a replacement is minted by the key that asked for it");
  t.equal(
    await rotateKey(database, root.id, { graceSeconds: 60, by: { clientId: "other" } }),
    null,
    "another client's: null",
  );
  t.equal(
    await rotateKey(database, root.id, { graceSeconds: 60, by: { clientId: "lin", scopes: ["read"] } }),
    null,
    "a key holding a scope the caller lacks: null",
  );
  await t.rejects(
    createKey(database, { clientId: "lin", name: "late", scopes: ["read"], mintedBy: child.id }),
    InactiveMinterError,
    "a key in its grace mints nothing",
  );
  const revoked = await revokeKey(database, root.id);
  t.same(revoked?.cascaded.sort(), [rotated?.id, grandchild.id, child.id].sort(), "the whole lineage, once each");
  for (const key of [root.key, child.key, rotated?.key as string, grandchild.key]) t.notOk(await active(key));
  t.ok(await active(sibling.key), "a key outside the lineage is untouched");
  t.equal(await revokeKey(database, sibling.id, { clientId: "other" }), null, "another client's key: null");
  t.ok(await active(sibling.key));
});

t.test("the holder of a replacement ends the old key's grace without losing it", async (t) => {
  const active = async (key: string) => (await findActiveKeyByHash(database, hashKey(key))) !== null;
  const old = await createKey(database, { clientId: "grace", name: "old", scopes: ["admin"] });
  const rotated = await rotateKey(database, old.id, { graceSeconds: 3600, by: { keyId: old.id } });
  const revoked = await revokeKey(database, old.id, { keyId: rotated?.id as string });
  t.same(revoked?.cascaded, [], "the caller's own key is spared");
  t.notOk(await active(old.key));
  t.ok(await active(rotated?.key as string));
  // Anyone else revoking the old key reaches the replacement it minted.
  const again = await revokeKey(database, old.id);
  t.same(again?.cascaded, [rotated?.id]);
  t.notOk(await active(rotated?.key as string));
});

t.test("a chain of any depth is revoked whole", async (t) => {
  const root = await createKey(database, { clientId: "deep", name: "k0", scopes: ["admin"] });
  let last = root;
  for (let i = 1; i <= 80; i++) {
    last = await createKey(database, { clientId: "deep", name: `k${i}`, scopes: ["admin"], mintedBy: last.id });
  }
  const revoked = await revokeKey(database, root.id);
  t.equal(revoked?.cascaded.length, 80);
  t.equal(await findActiveKeyByHash(database, hashKey(last.key)), null);
});
