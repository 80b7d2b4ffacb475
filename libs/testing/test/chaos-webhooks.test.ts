import t from "tap";
import { type ReceivedPost, tallyWebhookPosts, webhookEventsOwed } from "../src/chaos.js";

// The chaos run's webhook row: what the client's endpoint is owed, from the channels' statuses
// after the run, against what its receiver verified. A notification whose channels all ended is
// owed one notification.completed; one with a channel waiting or unsettled is owed none.
const channels = [
  { notification_id: "done", channel: "email", status: "delivered" },
  { notification_id: "done", channel: "sms", status: "bounced" },
  { notification_id: "open", channel: "email", status: "delivered" },
  { notification_id: "open", channel: "sms", status: "unsettled" },
  { notification_id: "quiet", channel: "push", status: "suppressed" },
  { notification_id: "late", channel: "push", status: "expired" },
];
const known = ["done", "open", "quiet", "late", "unrouted"];

t.test("a completion is owed for each notification whose channels all ended, and no other", async (t) => {
  const owed = webhookEventsOwed(known, channels);
  const completions = [...owed].filter((key) => key.includes(":notification.completed:")).sort();
  t.same(completions, [
    "done:notification.completed:",
    "late:notification.completed:",
    "quiet:notification.completed:",
  ]);
  t.ok(owed.has("open:channel.unsettled:sms"), "an unsettled channel's event is owed");
  t.ok(owed.has("done:channel.delivered:sms") && owed.has("done:channel.bounced:sms"), "a bounce: both");
  t.ok(owed.has("unrouted:notification.accepted:"), "an acceptance for every notification known");
  t.notOk(owed.has("unrouted:notification.completed:"), "none for one without channels");
});

let clock = Date.parse("2026-01-01T00:00:00Z");
const post = (webhookId: string, type: string, notificationId: string, channel?: string): ReceivedPost => ({
  name: "chaos",
  webhook_id: webhookId,
  verified: true,
  received_at: new Date(clock++).toISOString(),
  body: { type, data: { notification_id: notificationId, channel, status: "x" } },
});

t.test("completions missing, repeated and extra are counted", async (t) => {
  const owed = webhookEventsOwed(known, channels);
  const posts = [
    post("evt_1", "notification.completed", "done"),
    post("evt_1", "notification.completed", "done"), // the same event again: a duplicate, allowed
    post("evt_2", "notification.completed", "quiet"),
    post("evt_3", "notification.completed", "quiet"), // a second event for one notification
    post("evt_4", "notification.completed", "open"), // one for a notification not owed any
  ];
  const tally = tallyWebhookPosts(owed, posts, 0);
  t.same(tally.completions, { expected: 3, received: 2, missing: 1, extra: 2 }, "late's is missing");
  t.equal(tally.duplicates, 1, "the repeated post of one webhook-id");
  t.equal(tally.expected, owed.size);
  t.equal(tally.received, 2);
});

t.test("every event owed received once: nothing missing, nothing extra", async (t) => {
  const owed = webhookEventsOwed(known, channels);
  let n = 0;
  const posts = [...owed].map((key) => {
    const [id, type, channel] = key.split(":") as [string, string, string];
    return post(`evt_${++n}`, type, id, channel === "" ? undefined : channel);
  });
  const tally = tallyWebhookPosts(owed, posts, 0);
  t.match(tally, { missing: 0, duplicates: 0, unsigned: 0, otherClient: 0, afterLastFault: owed.size });
  t.same(tally.completions, { expected: 3, received: 3, missing: 0, extra: 0 });
});
