import fc from "fast-check";
import t from "tap";
import { CHANNELS, decideChannels, missingParams } from "../src/index.js";

const reach = { email: "a@example.com", phone: "+15550001111", pushSubscriptions: 1 };
const none = { channelOptout: [], categoryOptout: [] };

t.test("without an override, the user's reachable, not opted-out channels are used", async (t) => {
  const decisions = decideChannels({
    requested: null,
    category: "news",
    critical: false,
    preferences: { channelOptout: ["sms"], categoryOptout: [] },
    reach,
  });
  t.same(decisions, [
    { channel: "push", route: true },
    { channel: "email", route: true },
  ]);
  const noPhone = decideChannels({
    requested: null,
    category: "news",
    critical: false,
    preferences: none,
    reach: { email: "a@x.io", phone: null, pushSubscriptions: 0 },
  });
  t.same(noPhone, [{ channel: "email", route: true }]);
});

t.test("opt-outs suppress with a reason; critical categories are never suppressed", async (t) => {
  const prefs = { channelOptout: ["email"], categoryOptout: ["security"] };
  t.same(decideChannels({ requested: ["email"], category: "news", critical: false, preferences: prefs, reach }), [
    { channel: "email", route: false, reason: "opted_out" },
  ]);
  t.same(decideChannels({ requested: ["sms"], category: "security", critical: false, preferences: prefs, reach }), [
    { channel: "sms", route: false, reason: "category_opted_out" },
  ]);
  t.same(
    decideChannels({ requested: ["email", "sms"], category: "security", critical: true, preferences: prefs, reach }),
    [
      { channel: "email", route: true },
      { channel: "sms", route: true },
    ],
  );
});

t.test("an unreachable requested channel is recorded, not dropped", async (t) => {
  t.same(
    decideChannels({
      requested: ["sms", "push"],
      category: "otp",
      critical: true,
      preferences: none,
      reach: { email: null, phone: null, pushSubscriptions: 0 },
    }),
    [
      { channel: "sms", route: false, reason: "unreachable" },
      { channel: "push", route: false, reason: "unreachable" },
    ],
  );
});

t.test(
  "property: one decision per requested channel, and opted-out channels are never routed unless critical",
  async (t) => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.constantFrom(...CHANNELS), { minLength: 1 }),
        fc.subarray([...CHANNELS]),
        fc.boolean(),
        (requested, optout, critical) => {
          const decisions = decideChannels({
            requested,
            category: "c",
            critical,
            preferences: { channelOptout: optout, categoryOptout: [] },
            reach,
          });
          return (
            decisions.length === requested.length &&
            decisions.every((d, i) => d.channel === requested[i]) &&
            decisions.every((d) => critical || !(d.route && optout.includes(d.channel)))
          );
        },
      ),
    );
    t.pass("held");
  },
);

t.test("missingParams names every missing declared parameter, nested ones by path", async (t) => {
  t.same(missingParams(["name", "order.id"], { name: "x", order: { id: 0 } }), []);
  t.same(missingParams(["name", "order.id"], { order: {} }), [
    { field: "data.name", message: 'template parameter "name" is required' },
    { field: "data.order.id", message: 'template parameter "order.id" is required' },
  ]);
  t.same(
    missingParams(["a.b"], { a: "string" }).map((e) => e.field),
    ["data.a.b"],
  );
  t.same(missingParams(["a"], { a: null }).length, 1, "null counts as missing");
});
