// npm run chaos: the whole service on its own PostgreSQL and nats-server, N notifications (mixed
// channels and lanes, quiet hours, provider faults and slow providers) while each app is SIGKILLed
// several times, nats-server is restarted once and PostgreSQL crashes once; then what every
// provider sandbox received is checked against the database: lost, duplicated, unsettled, and
// the time from the last fault until every notification was terminal; and what a client's webhook
// endpoint on the stack's receiver heard (every event owed, signed, none for another client, one
// completion per notification whose channels all ended). Beside them, scheduled notifications
// (send_at 3-30 s ahead) and digest items (users times two keys, window 10 s, max_items 5) are
// held and come due during the faults: every scheduled send received once and none early, every
// item in exactly one digest sent once, listed once, received once per channel.
//   CHAOS_NOTIFICATIONS (20000), CHAOS_KILLS per app (3), CHAOS_USERS (40), CHAOS_CONCURRENCY (32),
//   CHAOS_SCHEDULED (600), CHAOS_DIGEST_ITEMS (1000), CHAOS_DIGEST_USERS (5),
//   CHAOS_WEBHOOK_SETTLE_MS (600000: how long the webhook backlog may take once every
//   notification is terminal), CHAOS_KEEP=1 keeps the data folder
import { formatChaosReport, runChaos } from "@notify/testing/chaos";

const report = await runChaos({
  notifications: Number(process.env.CHAOS_NOTIFICATIONS ?? 20_000),
  kills: Number(process.env.CHAOS_KILLS ?? 3),
  users: Number(process.env.CHAOS_USERS ?? 40),
  concurrency: Number(process.env.CHAOS_CONCURRENCY ?? 32),
  restartNats: true,
  restartPostgres: true,
  providerFaults: true,
  quietHours: true,
  settleMs: 300_000,
  webhookSettleMs: Number(process.env.CHAOS_WEBHOOK_SETTLE_MS ?? 600_000),
  scheduled: Number(process.env.CHAOS_SCHEDULED ?? 600),
  digestItems: Number(process.env.CHAOS_DIGEST_ITEMS ?? 1000),
  digestUsers: Number(process.env.CHAOS_DIGEST_USERS ?? 5),
  onProgress: (line) => console.log(`  ${line}`),
});
console.log(`\n${formatChaosReport(report)}`);
const tally = Object.values(report.channels);
const hooks = report.webhooks;
const scheduled = report.scheduled;
const digests = report.digests;
const bad =
  report.missing +
    report.notTerminal +
    tally.reduce((n, t) => n + t.lost + t.duplicates + t.waiting, 0) +
    hooks.missing +
    hooks.completions.extra +
    hooks.stillOwed +
    hooks.unsigned +
    hooks.otherClient +
    (scheduled
      ? scheduled.refused + scheduled.missing + scheduled.duplicates + scheduled.early + scheduled.waiting
      : 0) +
    (digests
      ? digests.refused +
        digests.missing +
        digests.notSent +
        digests.duplicates +
        digests.misplaced +
        digests.sentTwice +
        digests.early +
        digests.inconsistent +
        digests.sends.missing +
        digests.sends.duplicates +
        digests.sends.waiting
      : 0) >
  0;
process.exit(bad ? 1 : 0);
