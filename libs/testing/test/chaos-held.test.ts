import t from "tap";
import {
  type DigestItemPosted,
  type DigestRecords,
  type ScheduledChannelRow,
  type ScheduledSend,
  tallyDigests,
  tallyScheduled,
} from "../src/chaos.js";

// The chaos run's rows for scheduled notifications and digests: what the providers and the
// database hold after the run against what was accepted. A scheduled send must be received once
// and nothing of it may happen before its send_at; a digest item must be listed once, in the one
// sent digest it joined, and each digest sent once, not early, and received once per channel.
const T = Date.parse("2026-01-01T00:00:00Z");
const at = (ms: number) => new Date(T + ms);

t.test("scheduled sends: received, early, unsettled, missing, repeated, waiting", async (t) => {
  const sends: ScheduledSend[] = [
    { id: "ok", channels: ["email", "in_app"], sendAt: T + 10_000 },
    { id: "early-receipt", channels: ["sms"], sendAt: T + 10_000 },
    { id: "early-attempt", channels: ["push"], sendAt: T + 10_000 },
    { id: "early-release", channels: ["email"], sendAt: T + 10_000 },
    { id: "cut", channels: ["sms"], sendAt: T },
    { id: "lost", channels: ["email"], sendAt: T },
    { id: "twice", channels: ["push"], sendAt: T },
    { id: "held", channels: ["email"], sendAt: T },
  ];
  const row = (
    id: string,
    channel: string,
    status: string,
    attempt?: number,
    sending?: number,
  ): ScheduledChannelRow => ({
    notification_id: id,
    channel,
    status,
    first_attempt: attempt === undefined ? null : at(attempt),
    first_sending: sending === undefined ? null : at(sending),
  });
  const rows = [
    row("ok", "email", "delivered", 10_500, 10_000),
    row("ok", "in_app", "delivered", 10_200, 10_000),
    row("early-receipt", "sms", "delivered", 10_000, 10_000),
    row("early-attempt", "push", "delivered", 9_999, 10_000),
    row("early-release", "email", "delivered", 10_100, 9_000),
    row("cut", "sms", "unsettled", 100, 50),
    row("lost", "email", "delivered", 100, 50),
    row("twice", "push", "delivered", 100, 50),
    row("held", "email", "deferred"),
  ];
  const receipts = new Map<string, number[]>([
    ["ok:email", [T + 11_000]],
    ["ok:in_app", [T + 10_300]],
    ["early-receipt:sms", [T + 9_000]],
    ["early-attempt:push", [T + 10_100]],
    ["early-release:email", [T + 10_200]],
    ["twice:push", [T + 200, T + 300]],
  ]);
  const tally = tallyScheduled(sends, 2, rows, receipts);
  t.match(tally, {
    notifications: 8,
    refused: 2,
    expected: 9,
    received: 6,
    unsettled: 1,
    missing: 2,
    duplicates: 1,
    early: 3,
    waiting: 1,
  });
  t.equal(tally.lagMax, 1, "the latest receipt came 1 s after its send_at");
});

const items: DigestItemPosted[] = [
  { id: "i1", who: "d1", userId: "u1", key: "comments", channels: ["email", "in_app"] },
  { id: "i2", who: "d2", userId: "u1", key: "comments", channels: ["email", "in_app"] },
  { id: "i3", who: "d3", userId: "u2", key: "likes", channels: ["sms"] },
];
const digest = (id: string, userId: string, key: string, over: Partial<DigestRecords["digests"][number]> = {}) => ({
  id,
  user_id: userId,
  key,
  status: "sent",
  item_count: 1,
  max_items: 5,
  opened_at: at(0),
  sent_at: at(10_500),
  notification_id: `n-${id}`,
  last_joined_at: at(1000),
  ...over,
});
const good = (): DigestRecords => ({
  joined: [
    { notification_id: "i1", digest_id: "g1" },
    { notification_id: "i2", digest_id: "g1" },
    { notification_id: "i3", digest_id: "g2" },
  ],
  digests: [digest("g1", "u1", "comments", { item_count: 2 }), digest("g2", "u2", "likes")],
  notifications: [
    { id: "n-g1", digest_of: "g1", data: { items: [{ who: "d1" }, { who: "d2" }], count: 2, omitted: 0 } },
    { id: "n-g2", digest_of: "g2", data: { items: [{ who: "d3" }], count: 1, omitted: 0 } },
  ],
  channels: [
    { notification_id: "n-g1", channel: "email", status: "delivered" },
    { notification_id: "n-g1", channel: "in_app", status: "delivered" },
    { notification_id: "n-g2", channel: "sms", status: "delivered" },
  ],
  inbox: [{ notification_id: "n-g1", body: "d1 d2 " }],
  receipts: new Map([
    ["n-g1:email", [T + 11_000]],
    ["n-g1:in_app", [T + 11_000]],
    ["n-g2:sms", [T + 11_000]],
  ]),
});

t.test("digests: every item listed once in its sent digest, each sent once and received once", async (t) => {
  t.same(tallyDigests(items, 0, 10_000, good()), {
    items: 3,
    refused: 0,
    sent: 3,
    missing: 0,
    duplicates: 0,
    misplaced: 0,
    notSent: 0,
    digests: 2,
    full: 0,
    byWindow: 2,
    sentTwice: 0,
    early: 0,
    inconsistent: 0,
    sends: { expected: 3, received: 3, unsettled: 0, missing: 0, duplicates: 0, waiting: 0 },
  });
});

t.test("digests: an item listed twice, or in another user's digest, or left out", async (t) => {
  const records = good();
  records.notifications = [
    {
      id: "n-g1",
      digest_of: "g1",
      data: { items: [{ who: "d1" }, { who: "d1" }, { who: "d3" }], count: 2, omitted: 0 },
    },
    { id: "n-g2", digest_of: "g2", data: { items: [], count: 1, omitted: 0 } },
  ];
  const tally = tallyDigests(items, 0, 10_000, records);
  t.match(tally, { sent: 1, missing: 2, duplicates: 1, misplaced: 1, notSent: 0 });
  t.equal(tally.inconsistent, 1, "n-g1's in-app body lists d1 d2, its data d1 d1 d3");
});

t.test("digests: sent twice, early, not sent, and sends missing or repeated", async (t) => {
  const records = good();
  records.notifications = [
    records.notifications[0] as DigestRecords["notifications"][number],
    { id: "n-g1-again", digest_of: "g1", data: { items: [{ who: "d1" }, { who: "d2" }], count: 2, omitted: 0 } },
  ];
  records.digests = [
    digest("g1", "u1", "comments", { item_count: 2, sent_at: at(9_000) }),
    digest("g2", "u2", "likes", { status: "open", sent_at: null, notification_id: null }),
  ];
  records.receipts = new Map([["n-g1:email", [T + 9_500, T + 9_600]]]);
  const tally = tallyDigests(items, 1, 10_000, records);
  t.match(tally, { refused: 1, sentTwice: 1, early: 1, notSent: 1, missing: 1, duplicates: 2, digests: 1 });
  t.match(tally.sends, { expected: 4, received: 1, duplicates: 1, missing: 3, waiting: 2 });
});

t.test("digests: a full digest may go at once; one sent before its last item joined is early", async (t) => {
  const records = good();
  records.digests = [
    digest("g1", "u1", "comments", { item_count: 2, max_items: 2, sent_at: at(1500) }),
    digest("g2", "u2", "likes", { sent_at: at(12_000), last_joined_at: at(13_000) }),
  ];
  t.match(tallyDigests(items, 0, 10_000, records), { full: 1, byWindow: 1, early: 1 });
});

t.test("digests: a notification made for a digest whose row names none counts as sent twice", async (t) => {
  const records = good();
  records.digests = [
    digest("g1", "u1", "comments", { item_count: 2 }),
    digest("g2", "u2", "likes", { status: "open", sent_at: null, notification_id: null }),
  ];
  t.match(tallyDigests(items, 0, 10_000, records), { sentTwice: 1, digests: 1, notSent: 1, missing: 1 });
});
