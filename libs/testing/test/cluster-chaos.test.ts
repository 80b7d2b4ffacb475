import t from "tap";
import { arrivalBound, busiestWindow, formatClusterChaosReport, runClusterChaos } from "../src/cluster-chaos.js";

// The cluster chaos run, small (npm run chaos:cluster sends 10 000): three NATS nodes, two
// instances of every app; one node and one instance of each app SIGKILLed mid-run for good.
t.test(
  "on a three-node cluster with an instance of each app and a node killed: nothing lost, once, in order, within rate",
  async (t) => {
    const report = await runClusterChaos({ notifications: 300, users: 24, concurrency: 12, settleMs: 100_000 });
    t.comment(formatClusterChaosReport(report));
    t.equal(report.refused, 0, "every notification was accepted by one ingest instance or the other");
    t.equal(report.missing, 0);
    t.equal(report.notTerminal, 0, "every notification reached a terminal status with no operator");
    for (const [channel, tally] of Object.entries(report.channels)) {
      t.equal(tally.lost, 0, `${channel}: nothing reported delivered that its provider lacks`);
      t.equal(tally.duplicates, 0, `${channel}: no provider received anything twice`);
    }
    t.same(report.orderViolations, [], "each user's notifications routed in the order they were accepted");
    for (const [provider, rate] of Object.entries(report.rates)) {
      t.ok(
        rate.busiestSecond <= rate.bound,
        `${provider}: ${rate.busiestSecond} in its busiest second (bound ${rate.bound})`,
      );
    }
    t.equal(report.faults.length, 3, "every fault was injected");
  },
);

t.test("the busiest window counts what one second of timestamps holds", async (t) => {
  t.equal(busiestWindow([]), 0);
  t.equal(busiestWindow([0, 999, 1000, 1500, 1999, 2000]), 3, "a window is under a second wide");
  t.equal(busiestWindow([5, 5, 5]), 3);
});

t.test("the provider-side bound stays below what two unshared buckets would send", async (t) => {
  for (const limit of [
    { perSecond: 150, burst: 30 },
    { perSecond: 100, burst: 20 },
  ]) {
    const bound = arrivalBound(limit);
    t.ok(bound >= limit.perSecond + limit.burst, "at least the bucket's own one-second bound");
    t.ok(bound < 2 * limit.perSecond, "below two workers each at the full rate");
  }
});
