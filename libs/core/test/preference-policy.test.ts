import fc from "fast-check";
import t from "tap";
import {
  CHANNELS,
  capDay,
  countsTowardCap,
  decideRouting,
  type PolicyInput,
  PRIORITIES,
  quietWindowAt,
} from "../src/index.js";

const reach = { email: "a@example.com", phone: "+15550001111", pushSubscriptions: 1 };
const noPrefs = { channelOptout: [], categoryOptout: [], quietHours: null, rateCapPerDay: null, timeZone: null };
// 23:30 in London on 2026-06-01 (BST): inside a 22:00-07:00 window that ends at 06:00Z.
const night = new Date("2026-06-01T22:30:00Z");
const quietHours = { start: "22:00", end: "07:00", tz: "Europe/London" };

const input = (over: Partial<PolicyInput> = {}): PolicyInput => ({
  requested: null,
  category: "news",
  priority: "promotional",
  critical: false,
  preferences: noPrefs,
  reach,
  now: night,
  quietHoursAction: "defer",
  ...over,
});

t.test("channel selection: the override, else every channel the user can be reached on", async (t) => {
  t.same(decideRouting(input()), [
    { channel: "push", action: "route" },
    { channel: "email", action: "route" },
    { channel: "sms", action: "route" },
  ]);
  t.same(
    decideRouting(input({ reach: { email: "a@x.io", phone: null, pushSubscriptions: 0 } })),
    [{ channel: "email", action: "route" }],
    "only channels with an address",
  );
  t.same(decideRouting(input({ requested: ["in_app", "email"] })), [
    { channel: "in_app", action: "route" },
    { channel: "email", action: "route" },
  ]);
  t.same(
    decideRouting(input({ reach: { email: null, phone: null, pushSubscriptions: 0 } })),
    [
      { channel: "push", action: "suppress", reason: "unreachable" },
      { channel: "email", action: "suppress", reason: "unreachable" },
      { channel: "sms", action: "suppress", reason: "unreachable" },
    ],
    "a user reachable nowhere is recorded as such",
  );
});

t.test("opt-outs: channel first, then category; opted-out channels show as suppressed", async (t) => {
  const preferences = { ...noPrefs, channelOptout: ["sms"], categoryOptout: ["news"] };
  t.same(decideRouting(input({ preferences, priority: "transactional" })), [
    { channel: "push", action: "suppress", reason: "category_opted_out" },
    { channel: "email", action: "suppress", reason: "category_opted_out" },
    { channel: "sms", action: "suppress", reason: "opted_out" },
  ]);
  t.same(decideRouting(input({ preferences: { ...preferences, categoryOptout: [] }, requested: ["sms", "email"] })), [
    { channel: "sms", action: "suppress", reason: "opted_out" },
    { channel: "email", action: "route" },
  ]);
});

t.test("critical categories ignore every preference, but not a missing address", async (t) => {
  const preferences = {
    channelOptout: ["email", "sms", "push"],
    categoryOptout: ["security"],
    quietHours,
    rateCapPerDay: 0,
    timeZone: "Europe/London",
  };
  for (const priority of PRIORITIES) {
    t.same(
      decideRouting(input({ preferences, critical: true, category: "security", priority })),
      [
        { channel: "push", action: "route" },
        { channel: "email", action: "route" },
        { channel: "sms", action: "route" },
      ],
      priority,
    );
  }
  t.notOk(countsTowardCap(input({ preferences, critical: true }), true), "a critical one does not use up the cap");
  t.same(
    decideRouting(
      input({ critical: true, requested: ["sms"], reach: { email: null, phone: null, pushSubscriptions: 0 } }),
    ),
    [{ channel: "sms", action: "suppress", reason: "unreachable" }],
  );
});

t.test("quiet hours: transactional is sent, promotional is deferred to the window's end or dropped", async (t) => {
  const preferences = { ...noPrefs, quietHours };
  t.same(decideRouting(input({ preferences, priority: "transactional", requested: ["email"] })), [
    { channel: "email", action: "route" },
  ]);
  t.same(decideRouting(input({ preferences, requested: ["email", "push"] })), [
    { channel: "email", action: "defer", until: new Date("2026-06-02T06:00:00Z") },
    { channel: "push", action: "defer", until: new Date("2026-06-02T06:00:00Z") },
  ]);
  t.same(decideRouting(input({ preferences, requested: ["email"], quietHoursAction: "drop" })), [
    { channel: "email", action: "suppress", reason: "quiet_hours" },
  ]);
  t.same(
    decideRouting(input({ preferences: { ...preferences, channelOptout: ["email"] }, requested: ["email", "sms"] })),
    [
      { channel: "email", action: "suppress", reason: "opted_out" },
      { channel: "sms", action: "defer", until: new Date("2026-06-02T06:00:00Z") },
    ],
    "an opt-out is final; only what would be sent waits",
  );
  t.same(decideRouting(input({ preferences, requested: ["email"], now: new Date("2026-06-02T06:00:00Z") })), [
    { channel: "email", action: "route" },
  ]);
});

t.test("the daily cap: promotional only, counted when something would be sent, day in the user's zone", async (t) => {
  const capped = { ...noPrefs, rateCapPerDay: 3 };
  t.ok(countsTowardCap(input({ preferences: capped }), true));
  t.notOk(countsTowardCap(input({ preferences: capped }), false), "nothing to send, nothing counted");
  t.notOk(countsTowardCap(input({ preferences: capped, priority: "transactional" }), true));
  t.notOk(countsTowardCap(input({ preferences: noPrefs }), true), "no cap set");
  t.equal(capDay(new Date("2026-06-01T23:30:00Z"), { quietHours }), "2026-06-02", "00:30 BST is the next day");
  t.equal(capDay(new Date("2026-06-01T23:30:00Z"), { quietHours: null }), "2026-06-01", "UTC without a zone");
  t.equal(
    capDay(new Date("2026-06-02T03:30:00Z"), { quietHours: { ...quietHours, tz: "America/Los_Angeles" } }),
    "2026-06-01",
  );
});

const prefsArb = fc.record({
  channelOptout: fc.subarray([...CHANNELS]),
  categoryOptout: fc.subarray(["news", "security", "orders"]),
  quietHours: fc.option(
    fc.record({
      start: fc.constantFrom("00:00", "06:30", "22:00", "23:15"),
      end: fc.constantFrom("01:00", "07:00", "08:45", "21:59"),
      tz: fc.constantFrom("Europe/London", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"),
    }),
    { nil: null },
  ),
  rateCapPerDay: fc.option(fc.nat(5), { nil: null }),
  timeZone: fc.option(fc.constantFrom("UTC", "Asia/Tokyo"), { nil: null }),
});
const inputArb = fc.record({
  requested: fc.option(fc.uniqueArray(fc.constantFrom(...CHANNELS), { minLength: 1 }), { nil: null }),
  category: fc.constantFrom("news", "security", "orders"),
  priority: fc.constantFrom(...PRIORITIES),
  critical: fc.boolean(),
  preferences: prefsArb,
  reach: fc.record({
    email: fc.option(fc.constant("a@example.com"), { nil: null }),
    phone: fc.option(fc.constant("+15550001111"), { nil: null }),
    pushSubscriptions: fc.nat(2),
  }),
  now: fc.date({ min: new Date("2026-01-01T00:00:00Z"), max: new Date("2026-12-31T23:59:59Z"), noInvalidDate: true }),
  quietHoursAction: fc.constantFrom("defer" as const, "drop" as const),
});

t.test("property: the policy table holds for any preferences, request and time", async (t) => {
  fc.assert(
    fc.property(inputArb, (i) => {
      const decisions = decideRouting(i);
      const quiet = i.preferences.quietHours && quietWindowAt(i.now, i.preferences.quietHours);
      if (i.requested && decisions.map((d) => d.channel).join() !== i.requested.join()) return false;
      return decisions.every((d) => {
        // An opted-out channel or category is never sent, unless the category is critical.
        const optedOut =
          i.preferences.channelOptout.includes(d.channel) || i.preferences.categoryOptout.includes(i.category);
        if (d.action !== "suppress" && optedOut && !i.critical) return false;
        // Critical is never suppressed by a preference; only a missing address stops it.
        if (i.critical && d.action !== "route" && !(d.action === "suppress" && d.reason === "unreachable"))
          return false;
        // Transactional never waits for quiet hours.
        if (
          i.priority === "transactional" &&
          (d.action === "defer" || (d.action === "suppress" && d.reason === "quiet_hours"))
        )
          return false;
        // Promotional inside quiet hours is never sent now; a deferral ends with the window.
        if (i.priority === "promotional" && !i.critical && quiet && d.action === "route") return false;
        if (d.action === "defer")
          return quiet !== null && d.until.getTime() === quiet?.end.getTime() && d.until > i.now;
        return true;
      });
    }),
    { numRuns: 2000 },
  );
  t.pass("held");
});
