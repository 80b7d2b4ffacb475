import { onKeyChanged } from "@notify/bus";
import { hashKey } from "@notify/core";
import { seedApiKey } from "@notify/db";
import { eventually } from "@notify/testing";
import t from "tap";
import { createKeyLookup } from "../src/auth/api-keys.js";
import { ingestApp, otherConnection } from "./support.js";

// Several ingest instances behind a load balancer, each caching keys for a minute: a key revoked
// through one of them is refused by every other at once, because the revocation is announced on
// NATS; the cache TTL only bounds an announcement that was missed.
const a = await ingestApp(t);
const { database, bus } = a;
const CACHE_MS = 60_000;

/** Another ingest instance: its own NATS connection and key cache, listening once it returns. */
async function otherInstance() {
  const lookup = createKeyLookup(database, CACHE_MS);
  const own = await otherConnection(t, bus);
  onKeyChanged(own, (event) => lookup.forget(event.key_id));
  // The subscription has reached the server (a round trip), so no announcement can pass it by.
  await own.nc.flush();
  return lookup;
}
const adminKey = await seedApiKey(database, { clientId: "ops", name: "operator", scopes: ["operator"] });
const keyId = async (key: string) =>
  ((await database.sql`select id from api_keys where key_hash = ${hashKey(key)}`)[0] as { id: string }).id;

// Revocation and rotation (with no grace) both end a key through instance a: b, which cached
// it for a minute, refuses it within moments.
const endings = [
  { name: "revoked", path: "", method: "DELETE", body: undefined, status: 204 },
  { name: "rotated", path: "/rotate", method: "POST", body: JSON.stringify({ grace_seconds: 0 }), status: 201 },
] as const;
for (const ending of endings) {
  t.test(`a key ${ending.name} through one instance is refused by another within moments`, async (t) => {
    const b = await otherInstance();
    const key = await seedApiKey(database, { clientId: "shop", name: ending.name, scopes: ["ingest"] });
    t.ok(await b(key), "b knows the key, and caches it for a minute");
    const answer = await a.app.request(`/api/v1/keys/${await keyId(key)}${ending.path}`, {
      method: ending.method,
      headers: { authorization: `Bearer ${adminKey}`, "content-type": "application/json" },
      ...(ending.body === undefined ? {} : { body: ending.body }),
    });
    t.equal(answer.status, ending.status);
    // Within seconds, on a loaded machine too: the cache alone would hold the key for a minute.
    await eventually(async () => ((await b(key)) === null ? true : undefined), 5000, "b refuses the key");
  });
}

t.test("without an announcement the cache holds: the announcement is what reached b", async (t) => {
  const b = await otherInstance();
  const key = await seedApiKey(database, { clientId: "shop", name: "quiet", scopes: ["ingest"] });
  t.ok(await b(key));
  await database.sql`update api_keys set revoked_at = now() where key_hash = ${hashKey(key)}`;
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.ok(await b(key), "still cached: nothing told b");
  b.forget(await keyId(key));
  t.equal(await b(key), null, "forgotten, it is looked up again and refused");
});

t.test("a malformed announcement is ignored", async (t) => {
  const b = await otherInstance();
  const key = await seedApiKey(database, { clientId: "shop", name: "kept", scopes: ["ingest"] });
  t.ok(await b(key));
  for (const junk of ["not json", "{}", '{"key_id": 5}', "null"])
    bus.nc.publish(`${bus.naming.namespace}.notify.events.keys`, junk);
  await bus.nc.flush();
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.ok(await b(key), "the key still authenticates");
});
