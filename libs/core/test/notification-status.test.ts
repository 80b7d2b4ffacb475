import fc from "fast-check";
import t from "tap";
import {
  CHANNEL_STATUSES,
  type ChannelStatus,
  canTransition,
  NOTIFICATION_STATUS_DESCRIPTIONS,
  NOTIFICATION_STATUSES,
  type NotificationStatus,
  notificationStatus,
} from "../src/index.js";

const status = fc.constantFrom(...CHANNEL_STATUSES);
// One status per channel in practice (four channels); longer lists check that repeats do not matter.
const channels = fc.array(status, { maxLength: 8 });

const WAITING: ChannelStatus[] = ["pending", "deferred", "retrying", "parked"];
const some = (list: ChannelStatus[], ...wanted: ChannelStatus[]) => list.some((s) => wanted.includes(s));
const every = (list: ChannelStatus[], ...wanted: ChannelStatus[]) => list.every((s) => wanted.includes(s));

/** Each status as NOTIFICATION_STATUS_DESCRIPTIONS words it; exactly one may hold for any channels. */
const DEFINITIONS: Record<NotificationStatus, (list: ChannelStatus[]) => boolean> = {
  accepted: (list) => list.length === 0,
  processing: (list) => some(list, ...WAITING),
  unsettled: (list) => !some(list, ...WAITING) && some(list, "unsettled"),
  completed: (list) => list.length > 0 && every(list, "delivered", "suppressed", "canceled") && some(list, "delivered"),
  partially_failed: (list) =>
    !some(list, ...WAITING, "unsettled") && some(list, "delivered") && some(list, "failed", "bounced", "expired"),
  failed: (list) =>
    !some(list, ...WAITING, "unsettled") && !some(list, "delivered") && some(list, "failed", "bounced", "expired"),
  suppressed: (list) => list.length > 0 && every(list, "suppressed"),
  canceled: (list) => list.length > 0 && every(list, "canceled", "suppressed") && some(list, "canceled"),
};

t.test("the set is closed: for any channels exactly one definition holds, and it is the answer", async (t) => {
  fc.assert(
    fc.property(channels, (list) => {
      const holding = NOTIFICATION_STATUSES.filter((s) => DEFINITIONS[s](list));
      return holding.length === 1 && holding[0] === notificationStatus(list);
    }),
    { numRuns: 2000 },
  );
  t.same(Object.keys(NOTIFICATION_STATUS_DESCRIPTIONS).sort(), [...NOTIFICATION_STATUSES].sort(), "each is documented");
});

t.test("order and repeats of the channels do not matter", async (t) => {
  const withPermutation = channels.chain((list) =>
    fc.tuple(fc.constant(list), fc.shuffledSubarray(list, { minLength: list.length, maxLength: list.length })),
  );
  fc.assert(
    fc.property(withPermutation, ([list, permuted]) => {
      const expected = notificationStatus(list);
      return notificationStatus(permuted) === expected && notificationStatus([...list, ...list]) === expected;
    }),
  );
  t.equal(notificationStatus(new Set<ChannelStatus>(["delivered", "failed"])), "partially_failed", "any iterable");
});

t.test("an outcome, once shown, is only changed by a bounce", async (t) => {
  // Channels move only as channel-status.ts allows; completed, partially_failed, failed and
  // suppressed are claimed only when no channel can still move except to bounced.
  const outcomes: NotificationStatus[] = ["completed", "partially_failed", "failed", "suppressed", "canceled"];
  fc.assert(
    fc.property(channels, fc.nat(), status, (list, index, to) => {
      const before = notificationStatus(list);
      if (!outcomes.includes(before) || list.length === 0) return true;
      const i = index % list.length;
      const from = list[i] as ChannelStatus;
      if (!canTransition(from, to)) return true;
      const after = notificationStatus(list.map((s, j) => (j === i ? to : s)));
      return after === before || to === "bounced";
    }),
    { numRuns: 2000 },
  );
  t.pass();
});

t.test("the precedence table, row by row", async (t) => {
  const cases: Array<[ChannelStatus[], NotificationStatus, string]> = [
    [[], "accepted", "not routed yet"],
    [["pending"], "processing", "queued for its worker"],
    [["delivered", "deferred"], "processing", "one channel held for quiet hours"],
    [["failed", "retrying"], "processing", "a retry may still deliver"],
    [["unsettled", "parked"], "processing", "waiting wins over unsettled"],
    [["unsettled"], "unsettled", "only a receipt can tell"],
    [["unsettled", "failed"], "unsettled", "may still become partially_failed"],
    [["unsettled", "delivered"], "unsettled", "may still become partially_failed"],
    [["unsettled", "suppressed"], "unsettled", "may still become completed or failed"],
    [["delivered", "failed"], "partially_failed", "one delivered, one failed"],
    [["delivered", "bounced", "suppressed"], "partially_failed", "a bounce counts as a failure"],
    [["delivered"], "completed", "delivered"],
    [["delivered", "suppressed"], "completed", "a suppressed channel was never meant to be sent"],
    [["bounced"], "failed", "the only channel bounced"],
    [["failed", "suppressed"], "failed", "nothing delivered"],
    [["suppressed", "suppressed"], "suppressed", "every channel suppressed"],
    [["canceled"], "canceled", "its client canceled the only channel"],
    [["canceled", "suppressed"], "canceled", "nothing sent, and the client canceled what would have been"],
    [["delivered", "canceled"], "completed", "a cancel stops only what was not sent"],
    [["failed", "canceled"], "failed", "nothing delivered, one failed"],
    [["canceled", "deferred"], "processing", "a deferred channel still waits"],
    [["canceled", "unsettled"], "unsettled", "the provider may still have accepted one"],
  ];
  for (const [list, expected, why] of cases) t.equal(notificationStatus(list), expected, `${list.join("+")}: ${why}`);
});
