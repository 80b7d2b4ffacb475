import t from "tap";
import { formatChaosReport, runChaos } from "../src/chaos.js";

// Up to 90 s for every notification to be terminal and as long again for the webhook posts to
// drain, on top of the run itself: more than the suite's three minutes a file on a busy machine.
t.setTimeout(420_000);

// The chaos suite, small (npm run chaos runs 20 000 with three kills of each app): the whole
// service on its own PostgreSQL and nats-server, 1 000 notifications over every channel and both
// lanes while each app is SIGKILLed, nats-server restarts, PostgreSQL crashes and every provider
// has an outage and a slow spell. Then: nothing lost, nothing sent twice, every notification
// terminal within 60 s of the last fault with no operator, and what ends unsettled is bounded by
// the sends in flight when the workers were killed; and the client's webhook endpoint heard every
// notification's acceptance, every channel's outcome and the completion of every notification
// whose channels all ended, signed, and another client's nothing. Beside them, 60 scheduled
// notifications (send_at 3-30 s ahead) and 120 digest items (4 users times 2 keys, window 10 s,
// max_items 5) are held, come due and close while the faults happen: every scheduled send is
// received once and none before its send_at; every item is in exactly one digest, sent once,
// whose notification lists it once and reaches each provider once.
t.test(
  "under kills, restarts and provider outages nothing is lost, nothing is sent twice, nothing stays stuck",
  async (t) => {
    const report = await runChaos({
      notifications: 1000,
      kills: 1,
      users: 20,
      concurrency: 16,
      restartNats: true,
      restartPostgres: true,
      providerFaults: true,
      quietHours: true,
      settleMs: 90_000,
      scheduled: 60,
      digestItems: 120,
      digestUsers: 4,
    });
    t.comment(formatChaosReport(report));
    t.equal(report.refused, 0, "every notification was accepted (an upstream retrying 503s with its idempotency key)");
    t.equal(report.missing, 0, "every notification accepted is known to the database");
    t.equal(report.notTerminal, 0, "every notification reached a terminal status");
    t.ok(report.recoverySeconds !== null && report.recoverySeconds <= 60, "within 60 s of the last fault");
    const tallies = Object.entries(report.channels);
    t.same(Object.keys(report.channels).sort(), ["email", "in_app", "push", "sms"], "every channel was exercised");
    for (const [channel, tally] of tallies) {
      t.equal(tally.lost, 0, `${channel}: nothing reported delivered that its provider lacks`);
      t.equal(tally.duplicates, 0, `${channel}: no provider received anything twice`);
      t.equal(tally.waiting, 0, `${channel}: no channel left waiting`);
    }
    // At-most-once's floor: a send in flight when its worker was killed may have reached the
    // provider, so it is never repeated; one kill of the workers holds at most the pools' slots.
    // The client's webhook endpoint heard every acceptance and outcome, signed; the other none.
    t.ok(report.webhooks.expected > report.accepted, "webhook events were owed");
    t.equal(report.webhooks.missing, 0, "every owed webhook event reached the client's endpoint");
    t.ok(report.webhooks.completions.expected > 0, "notification.completed events were owed");
    t.equal(report.webhooks.completions.missing, 0, "every completion owed reached the client's endpoint");
    t.equal(report.webhooks.completions.extra, 0, "one completion event per notification, none for one not owed it");
    t.equal(report.webhooks.unsigned, 0, "every webhook post verified");
    t.equal(report.webhooks.otherClient, 0, "another client's endpoint heard nothing");
    t.equal(report.webhooks.stillOwed, 0, "nothing is still owed");
    const scheduled = report.scheduled;
    const digests = report.digests;
    if (!scheduled || !digests) throw new Error("the run posted scheduled notifications and digest items");
    t.equal(scheduled.refused, 0, "every scheduled notification was accepted");
    t.equal(scheduled.expected, 60 * 2, "60 scheduled notifications, 2 sends each on average");
    t.equal(scheduled.missing, 0, "every scheduled send reached its provider (or was cut by a kill)");
    t.equal(scheduled.duplicates, 0, "no scheduled send reached its provider twice");
    t.equal(scheduled.early, 0, "nothing of a scheduled notification happened before its send_at");
    t.equal(scheduled.waiting, 0, "no scheduled channel left waiting");
    t.equal(digests.refused, 0, "every digest item was accepted");
    t.equal(digests.sent, 120, "every item is listed in the one sent digest it joined");
    t.equal(digests.missing, 0, "no item missing from its digest");
    t.equal(digests.notSent, 0, "every item's digest was sent");
    t.equal(digests.duplicates, 0, "no item listed twice");
    t.equal(digests.misplaced, 0, "no item in a digest of another user or key, or one it did not join");
    t.equal(digests.sentTwice, 0, "no digest sent twice");
    t.equal(digests.early, 0, "no digest sent before it filled up or its window ended");
    t.equal(digests.inconsistent, 0, "each digest notification's count and in-app body match its items");
    t.ok(digests.digests >= 120 / 5, `digests were sent (${digests.digests})`);
    t.equal(digests.sends.missing, 0, "every digest notification reached its providers (or was cut by a kill)");
    t.equal(digests.sends.duplicates, 0, "no digest notification reached a provider twice");
    t.equal(digests.sends.waiting, 0, "no digest notification's channel left waiting");
    const unsettled =
      tallies.reduce((n, [, c]) => n + c.unsettledReceived + c.unsettledNotReceived, 0) +
      scheduled.unsettled +
      digests.sends.unsettled;
    t.ok(unsettled <= 4 * (32 + 16), `unsettled (${unsettled}) bounded by the sends one kill can cut`);
  },
);
