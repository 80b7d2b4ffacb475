import { Kvm } from "@nats-io/kv";
import { bucketName, type KV } from "@notify/bus";
import { type RateLimit, splitRate } from "@notify/core";
import { freshBus } from "@notify/testing";
import t from "tap";
import { createRateLimiter, LimiterClosed } from "../src/providers/rate-limiter.js";

// The shared token buckets against a real NATS KV bucket. Two limiters on one key stand for two
// worker processes (the whole-process test runs two real ones); the bound is on what the
// buckets grant, so it holds however slow the machine is.
const bus = await freshBus(t);
const kv: KV = await new Kvm(bus.js).open(bucketName(bus.naming, "notify_rate"));

/** Grants of `count` single-token acquires spread over the given limiters, with their times. */
async function drain(limiters: ReturnType<typeof createRateLimiter>[], count: number) {
  const grants: Array<{ at: number; by: number }> = [];
  await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const by = i % limiters.length;
      await (limiters[by] as ReturnType<typeof createRateLimiter>).acquire("promotional", 1);
      grants.push({ at: Date.now(), by });
    }),
  );
  return grants.sort((a, b) => a.at - b.at);
}

t.test("two processes sharing a provider's bucket stay within its rate together", async (t) => {
  const limit: RateLimit = { perSecond: 40, burst: 4 };
  const rates = splitRate(limit, 0);
  const limiters = [createRateLimiter({ kv, key: "pair", rates }), createRateLimiter({ kv, key: "pair", rates })];
  t.teardown(() => {
    for (const limiter of limiters) limiter.close();
  });
  const grants = await drain(limiters, 100);
  t.equal(grants.length, 100, "nothing dropped: every waiting send got its token");
  const span = ((grants.at(-1)?.at ?? 0) - (grants[0]?.at ?? 0)) / 1000;
  // Grant times are taken after the round trip that granted them, hence the slack of 0.2 s.
  t.ok(grants.length <= limit.burst + limit.perSecond * (span + 0.2), `100 grants in ${span.toFixed(2)} s at 40/s`);
  t.ok(span >= (100 - limit.burst) / limit.perSecond - 0.2, "and not faster: the two did not each take the full rate");
  t.ok(grants.some((g) => g.by === 0) && grants.some((g) => g.by === 1), "both processes sent");
});

t.test("transactional keeps its reserved share under a promotional flood", async (t) => {
  const limiter = createRateLimiter({ kv, key: "reserve", rates: splitRate({ perSecond: 20, burst: 2 }, 50) });
  t.teardown(() => limiter.close());
  const order: string[] = [];
  const promotional = Array.from({ length: 60 }, () => limiter.acquire("promotional", 1).then(() => order.push("p")));
  await new Promise((resolve) => setTimeout(resolve, 300));
  const transactional = Array.from({ length: 10 }, () =>
    limiter.acquire("transactional", 1).then(() => order.push("t")),
  );
  await Promise.all(transactional);
  const promotionalBefore = order.filter((o) => o === "p").length;
  t.ok(
    promotionalBefore < 40,
    `all 10 transactional sends went while ${60 - promotionalBefore} promotional still waited`,
  );
  limiter.close();
  const settled = await Promise.allSettled(promotional);
  t.ok(
    settled
      .filter((s) => s.status === "rejected")
      .every((s) => s.status === "rejected" && s.reason instanceof LimiterClosed),
    "closing hands the waiting sends back",
  );
});

t.test("an acquire after close fails at once with LimiterClosed", async (t) => {
  const limiter = createRateLimiter({ kv, key: "closed", rates: splitRate({ perSecond: 1, burst: 1 }, 0) });
  limiter.close();
  await t.rejects(limiter.acquire("transactional", 1), LimiterClosed);
  t.equal(await limiter.acquire("transactional", 0), 0, "nothing to wait for");
});

t.test("a lane is spent only once the bucket has answered short, not while a request is in flight", async (t) => {
  const roomy = createRateLimiter({ kv, key: "roomy", rates: splitRate({ perSecond: 10_000, burst: 10_000 }, 0) });
  t.teardown(() => roomy.close());
  const all = Array.from({ length: 20 }, () => roomy.acquire("promotional", 1));
  t.ok(roomy.waiting("promotional") > 0, "sends wait for the bucket's answer");
  t.notOk(roomy.spent("promotional"), "which is no spent rate");
  t.same(await Promise.all(all), Array(20).fill(0), "nor counted as time waited for one");
  t.notOk(roomy.spent("promotional"));

  // A token every two seconds: the second send is left without one for a while.
  const tight = createRateLimiter({ kv, key: "tight", rates: splitRate({ perSecond: 0.5, burst: 1 }, 0) });
  t.teardown(() => tight.close());
  t.equal(await tight.acquire("promotional", 1), 0);
  const second = tight.acquire("promotional", 1);
  for (let i = 0; i < 150 && !tight.spent("promotional"); i++) await new Promise((r) => setTimeout(r, 10));
  t.ok(tight.spent("promotional"), "the bucket had no token for the second");
  t.notOk(tight.spent("transactional"), "per lane");
  t.ok((await second) > 0, "its wait for the token is counted");
  t.notOk(tight.spent("promotional"), "not once it was served");
});
