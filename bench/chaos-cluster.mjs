// npm run chaos:cluster: the whole service on a three-node JetStream cluster (streams and KV at
// three replicas) with two instances of every app, N notifications (email, SMS and in-app on both
// lanes) while one NATS node and one instance of each app are SIGKILLed mid-run and never come
// back; then: nothing lost, nothing sent twice (from the sandboxes' own records), each user's
// notifications routed in the order they were accepted, and no provider called above its
// configured rate (from the sandboxes' own timestamps).
//   CHAOS_NOTIFICATIONS (10000), CHAOS_USERS (60), CHAOS_CONCURRENCY (24)
import { formatClusterChaosReport, runClusterChaos } from "@notify/testing/cluster-chaos";

const report = await runClusterChaos({
  notifications: Number(process.env.CHAOS_NOTIFICATIONS ?? 10_000),
  users: Number(process.env.CHAOS_USERS ?? 60),
  concurrency: Number(process.env.CHAOS_CONCURRENCY ?? 24),
  settleMs: 300_000,
  onProgress: (line) => console.log(`  ${line}`),
});
console.log(`\n${formatClusterChaosReport(report)}`);
const channels = Object.values(report.channels);
const overRate = Object.values(report.rates).some((r) => r.busiestSecond > r.bound);
const bad =
  report.missing +
    report.notTerminal +
    report.orderViolations.length +
    channels.reduce((n, c) => n + c.lost + c.duplicates, 0) >
    0 || overRate;
process.exit(bad ? 1 : 0);
