import fc from "fast-check";
import t from "tap";
import {
  CHANNEL_STATUSES,
  CHANNELS,
  decideFallback,
  FALLBACK_CONDITIONS,
  type FallbackStep,
  fallbackProblems,
} from "../src/index.js";

const step = fc.record({
  channel: fc.constantFrom(...CHANNELS),
  when: fc.uniqueArray(fc.constantFrom(...FALLBACK_CONDITIONS), { minLength: 1 }),
  confirm_within_seconds: fc.integer({ min: 1, max: 600 }),
}) as fc.Arbitrary<FallbackStep>;
const watched = fc.record({ status: fc.constantFrom(...CHANNEL_STATUSES), confirmed: fc.boolean() });

t.test("a step is taken only for a condition it names, and only once the watched channel has an outcome", async (t) => {
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(step, watched, fc.boolean(), (s, w, due) => {
        const decision = decideFallback(s, w, due);
        if (decision.action !== "take") return true;
        if (!s.when.includes(decision.because)) return false;
        if (decision.because === "failed") return ["failed", "bounced", "expired"].includes(w.status);
        if (decision.because === "suppressed") return w.status === "suppressed";
        return due && !w.confirmed && ["delivered", "unsettled"].includes(w.status);
      }),
    ),
  );
  t.doesNotThrow(
    () =>
      fc.assert(
        fc.property(step, watched, fc.boolean(), (s, w, due) => {
          const waiting = ["pending", "deferred", "retrying", "parked"].includes(w.status);
          return !waiting || decideFallback(s, w, due).action === "wait";
        }),
      ),
    "a channel still waiting is waited for",
  );
  t.doesNotThrow(
    () =>
      fc.assert(
        fc.property(
          step,
          fc.boolean(),
          (s, due) => decideFallback(s, { status: "delivered", confirmed: true }, due).action === "stop",
        ),
      ),
    "a confirmed delivery ends the chain",
  );
  t.doesNotThrow(
    () =>
      fc.assert(
        fc.property(
          step,
          fc.boolean(),
          fc.boolean(),
          (s, confirmed, due) => decideFallback(s, { status: "canceled", confirmed }, due).action === "stop",
        ),
      ),
    "a canceled channel ends the chain: its client wants nothing more sent",
  );
});

t.test("an unconfirmed step waits for its window, then fires", async (t) => {
  const s: FallbackStep = { channel: "sms", when: ["unconfirmed"], confirm_within_seconds: 60 };
  t.same(decideFallback(s, { status: "delivered", confirmed: false }, false), {
    action: "wait",
    confirmWithinSeconds: 60,
  });
  t.same(decideFallback(s, { status: "unsettled", confirmed: false }, true), {
    action: "take",
    because: "unconfirmed",
  });
  t.same(decideFallback(s, { status: "failed", confirmed: false }, true), { action: "stop" }, "not a failure step");
});

t.test("a failed step watches an accepted email or SMS for a bounce, for a while; never a capped one", async (t) => {
  const s: FallbackStep = { channel: "sms", when: ["failed"] };
  t.same(
    decideFallback(s, { status: "delivered", provider: "sendgrid", confirmed: false }, false),
    { action: "wait", confirmWithinSeconds: 3600 },
    "SendGrid may still report a bounce",
  );
  t.same(decideFallback(s, { status: "delivered", provider: "sendgrid", confirmed: false }, true), { action: "stop" });
  t.same(decideFallback(s, { status: "delivered", provider: "sendgrid", confirmed: true }, false), { action: "stop" });
  t.same(decideFallback(s, { status: "bounced", provider: "sendgrid", confirmed: false }, true), {
    action: "take",
    because: "failed",
  });
  t.same(
    decideFallback(s, { status: "delivered", provider: "smtp", confirmed: false }, false),
    { action: "stop" },
    "an SMTP relay reports nothing later",
  );
  t.same(
    decideFallback(
      { channel: "sms", when: ["suppressed"] },
      { status: "suppressed", reason: "rate_cap", confirmed: false },
      false,
    ),
    { action: "stop" },
    "the daily cap is not gone around",
  );
  t.same(
    decideFallback(
      { channel: "sms", when: ["suppressed"] },
      { status: "suppressed", reason: "throttled", confirmed: false },
      false,
    ),
    { action: "stop" },
    "nor is the notification's throttle",
  );
});

t.test("a chain starts from one channel, never repeats one, and waits only where it says so", async (t) => {
  t.same(fallbackProblems(["push"], [{ channel: "sms", when: ["failed"] }]), []);
  t.match(fallbackProblems(undefined, [{ channel: "sms", when: ["failed"] }]), [{ field: "channels" }]);
  t.match(fallbackProblems(["push", "email"], [{ channel: "sms", when: ["failed"] }]), [{ field: "channels" }]);
  t.match(fallbackProblems(["push"], [{ channel: "push", when: ["failed"] }]), [{ field: "fallback.0.channel" }]);
  t.match(
    fallbackProblems(
      ["push"],
      [
        { channel: "sms", when: ["failed"] },
        { channel: "sms", when: ["failed"] },
      ],
    ),
    [{ field: "fallback.1.channel" }],
  );
  t.match(fallbackProblems(["push"], [{ channel: "sms", when: ["unconfirmed"] }]), [
    { field: "fallback.0.confirm_within_seconds", message: /required/ },
  ]);
  t.match(fallbackProblems(["push"], [{ channel: "sms", when: ["failed"], confirm_within_seconds: 5 }]), [
    { field: "fallback.0.confirm_within_seconds", message: /only allowed/ },
  ]);
});
