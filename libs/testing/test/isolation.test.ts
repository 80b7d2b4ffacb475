import t from "tap";
import { eventually, freshBus, freshDatabase, freshNamespace } from "../src/index.js";

// What lets test files run in parallel on one Postgres and one NATS: each gets its own
// migrated database and its own namespace of streams, subjects and buckets.

t.test("fresh databases are migrated and apart", async (t) => {
  const [a, b] = await Promise.all([freshDatabase(t), freshDatabase(t)]);
  t.not(a.url, b.url);
  await a.database.sql`insert into audiences (id, name) values ('aud-1', 'only in a')`;
  const [inA] = await a.database.sql<{ n: number }[]>`select count(*)::int as n from audiences`;
  const [inB] = await b.database.sql<{ n: number }[]>`select count(*)::int as n from audiences`;
  t.equal(inA?.n, 1);
  t.equal(inB?.n, 0, "a row written in one is not in the other");
});

t.test("namespaces are unique and fresh buses have streams of their own", async (t) => {
  const names = new Set(Array.from({ length: 50 }, () => freshNamespace(t)));
  t.equal(names.size, 50);
  const [a, b] = await Promise.all([freshBus(t), freshBus(t)]);
  t.not(a.streams.work, b.streams.work);
  for (const bus of [a, b]) t.equal((await bus.jsm.streams.info(bus.streams.work)).config.name, bus.streams.work);
});

t.test("eventually waits for a value and names what it waited for when it gives up", async (t) => {
  let n = 0;
  t.equal(await eventually(async () => (++n >= 3 ? n : undefined), 2000, "three tries"), 3);
  await t.rejects(
    eventually(async () => undefined, 300, "a value that never comes"),
    {
      message: /timed out after 300 ms waiting for a value that never comes/,
    },
  );
});
