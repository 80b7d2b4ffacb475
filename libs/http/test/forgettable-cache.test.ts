import t from "tap";
import { createForgettableCache } from "../src/index.js";

t.test("keeps what it read, until forgotten", async (t) => {
  const cache = createForgettableCache<number | null>({ max: 10, ttlMs: 60_000 });
  let reads = 0;
  const read = async () => ++reads;
  t.equal(cache.get("a"), undefined);
  t.equal(await cache.load("a", read), 1);
  t.equal(cache.get("a"), 1);
  t.equal(await cache.load("a", read), 1, "a load of a kept key answers from the cache");
  t.equal(reads, 1, "without reading");
  t.equal(await cache.load("none", async () => null), null);
  t.equal(cache.get("none"), null, "null is a value: there is no such row");
  cache.forget("a");
  t.equal(cache.get("a"), undefined, "forgotten");
  t.equal(await cache.load("a", read), 2);
  t.equal(cache.get("a"), 2, "a read after the forget is kept");
});

t.test("a read that began before a forget does not keep what it saw", async (t) => {
  const cache = createForgettableCache<string>({ max: 10, ttlMs: 60_000 });
  let release: (value: string) => void = () => {};
  const reading = cache.load("a", () => new Promise<string>((resolve) => (release = resolve)));
  cache.forget("a");
  release("old row");
  t.equal(await reading, "old row", "the caller still gets its answer");
  t.equal(cache.get("a"), undefined, "but it is not kept");
});

t.test("forget by tag drops every key carrying it", async (t) => {
  const cache = createForgettableCache<{ id: string }>({ max: 10, ttlMs: 60_000, tagOf: (_, v) => v.id });
  await cache.load("hash-1", async () => ({ id: "key-a" }));
  await cache.load("hash-2", async () => ({ id: "key-a" }));
  await cache.load("hash-3", async () => ({ id: "key-b" }));
  cache.forget("key-a");
  t.equal(cache.get("hash-1"), undefined);
  t.equal(cache.get("hash-2"), undefined);
  t.same(cache.get("hash-3"), { id: "key-b" });
});

t.test("a TTL of 0, or a value's TTL below 1 ms, keeps nothing", async (t) => {
  const none = createForgettableCache<number>({ max: 10, ttlMs: 0 });
  await none.load("a", async () => 1);
  t.equal(none.get("a"), undefined);
  const some = createForgettableCache<number>({ max: 10, ttlMs: 60_000 });
  await some.load(
    "a",
    async () => 1,
    (v) => (v === 1 ? 0 : 1000),
  );
  t.equal(some.get("a"), undefined);
  await some.load(
    "b",
    async () => 2,
    (v) => (v === 1 ? 0 : 1000),
  );
  t.equal(some.get("b"), 2);
});

t.test("misses under way together share one read, unless a forget comes in between", async (t) => {
  const cache = createForgettableCache<string>({ max: 10, ttlMs: 60_000 });
  let reads = 0;
  const releases: Array<(value: string) => void> = [];
  const read = () => {
    reads++;
    return new Promise<string>((resolve) => releases.push(resolve));
  };
  const together = [cache.load("a", read), cache.load("a", read), cache.load("a", read)];
  t.equal(reads, 1, "three misses, one read");
  cache.forget("a");
  const after = cache.load("a", read);
  t.equal(reads, 2, "a miss after the forget does not join the read that began before it");
  releases[0]?.("old row");
  releases[1]?.("new row");
  t.same(await Promise.all(together), ["old row", "old row", "old row"]);
  t.equal(await after, "new row");
  t.equal(cache.get("a"), "new row", "only the read begun after the forget is kept");

  const failing = createForgettableCache<string>({ max: 10, ttlMs: 60_000 });
  const boom = async () => {
    throw new Error("down");
  };
  await t.rejects(Promise.all([failing.load("b", boom), failing.load("b", boom)]), /down/);
  t.equal(await failing.load("b", async () => "up"), "up", "a failed read is not shared with later callers");

  const uncached = createForgettableCache<string>({ max: 10, ttlMs: 0 });
  let direct = 0;
  await Promise.all([uncached.load("c", async () => `${++direct}`), uncached.load("c", async () => `${++direct}`)]);
  t.equal(direct, 2, "with nothing cached every load reads");
});
