import { freshDatabase } from "@notify/testing";
import t from "tap";
import { loadCredentialKeys, loadUnsubscribeKey } from "../../src/directory/deployment-secrets.js";
import { createDb } from "../../src/pool.js";

// The deployment's credentials secret is made by whichever process needs it first, once.

t.test("processes starting at once on a fresh database all read the one secret", async (t) => {
  const { url, database: fresh } = await freshDatabase(t);
  // A pool each, as processes have: their first statements run at the same moment.
  const pools = Array.from({ length: 8 }, () => createDb({ url, max: 1 }));
  t.teardown(() => Promise.all(pools.map((pool) => pool.close())));
  await Promise.all(pools.map((pool) => pool.ping()));
  const keys = await Promise.all(pools.map((pool) => loadCredentialKeys(pool)));
  t.ok(
    keys.every((k) => k.apiKey.equals(keys[0]?.apiKey as Buffer)),
    "one secret, however the inserts raced",
  );
  const [row] = await fresh.sql<{ n: number }[]>`select count(*)::int as n from deployment_secrets`;
  t.equal(row?.n, 1);
});

t.test("the unsubscribe secret is its own, made once however many ask at once", async (t) => {
  const { url, database: fresh } = await freshDatabase(t);
  const pools = Array.from({ length: 4 }, () => createDb({ url, max: 1 }));
  t.teardown(() => Promise.all(pools.map((pool) => pool.close())));
  const keys = await Promise.all(pools.map((pool) => loadUnsubscribeKey(pool)));
  t.ok(
    keys.every((k) => k.equals(keys[0] as Buffer)),
    "one key",
  );
  const credentials = await loadCredentialKeys(pools[0] as (typeof pools)[number]);
  t.notOk(credentials.apiKey.equals(keys[0] as Buffer), "not the credentials' key");
  const rows = await fresh.sql<{ name: string }[]>`select name from deployment_secrets order by name`;
  t.same(
    rows.map((r) => r.name),
    ["credentials", "unsubscribe"],
  );
});
