import fc from "fast-check";
import t from "tap";
import { smsValidity } from "../src/plivo/provider.js";
import { pushLifetime } from "../src/webpush/provider.js";

// What a provider tells its network about a message's deadline: a push service keeps it no
// longer than the time left, an SMS carrier drops it once its validity period runs out.
const now = Date.parse("2026-11-25T12:00:00Z");
const ttls = { transactional: 86_400, promotional: 3600 };
const inSeconds = (s: number) => new Date(now + s * 1000).toISOString();

t.test("push: the TTL never outlasts the deadline nor the lane's setting", async (t) => {
  t.same(pushLifetime({ priority: "transactional" }, ttls, now), { ttl: 86_400, urgency: "high" }, "no deadline");
  t.same(pushLifetime({ priority: "promotional", deliverBy: null }, ttls, now), { ttl: 3600, urgency: "low" });
  t.same(pushLifetime({ priority: "transactional", deliverBy: inSeconds(90) }, ttls, now), {
    ttl: 90,
    urgency: "high",
  });
  t.same(
    pushLifetime({ priority: "promotional", deliverBy: inSeconds(600) }, ttls, now),
    { ttl: 600, urgency: "high" },
    "a deadline within the hour makes a promotional push urgent",
  );
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(
        fc.constantFrom("transactional" as const, "promotional" as const),
        fc.integer({ min: 0, max: 28 * 86_400 }),
        (priority, left) => {
          const { ttl } = pushLifetime({ priority, deliverBy: inSeconds(left) }, ttls, now);
          return ttl >= 0 && ttl <= left && ttl <= ttls[priority];
        },
      ),
    ),
  );
});

t.test("SMS: a validity period within Plivo's range, only when the deadline is nearer than its longest", async (t) => {
  t.same(smsValidity({}, now), {}, "no deadline");
  t.same(smsValidity({ deliverBy: inSeconds(4 * 3600) }, now), {}, "further out than Plivo keeps messages");
  t.same(smsValidity({ deliverBy: inSeconds(600) }, now), { message_expiry: 600 });
  t.same(smsValidity({ deliverBy: inSeconds(1) }, now), { message_expiry: 5 }, "Plivo's shortest");
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 28 * 86_400 }), (left) => {
        const { message_expiry } = smsValidity({ deliverBy: inSeconds(left) }, now);
        if (left > 10_800) return message_expiry === undefined;
        return message_expiry !== undefined && message_expiry >= 5 && message_expiry <= Math.max(5, left);
      }),
    ),
  );
});
