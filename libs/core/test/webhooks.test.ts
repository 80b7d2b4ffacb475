import fc from "fast-check";
import t from "tap";
import {
  DEFAULT_WEBHOOK_RETRY_SCHEDULE_SECONDS,
  decideWebhookAttempt,
  newWebhookSecret,
  parseRetrySchedule,
  recipientOf,
  shouldDisableEndpoint,
  webhookEnvelope,
  webhookUrlProblem,
} from "../src/webhooks.js";

const failure = fc.record({
  ok: fc.constant(false as const),
  statusCode: fc.option(fc.integer({ min: 300, max: 599 }), { nil: null }),
  error: fc.string(),
  retryAfterMs: fc.option(fc.integer({ min: 0, max: 10 * 86_400_000 }), { nil: undefined }),
});

t.test("the default schedule retries for about three days over ten attempts", async (t) => {
  const total = DEFAULT_WEBHOOK_RETRY_SCHEDULE_SECONDS.reduce((a, b) => a + b, 0);
  t.ok(total > 2.5 * 86_400 && total < 3.5 * 86_400, `${(total / 86_400).toFixed(2)} days`);
  t.equal(DEFAULT_WEBHOOK_RETRY_SCHEDULE_SECONDS.length + 1, 10);
});

t.test("a 2xx is delivered whatever the attempt", async () => {
  fc.assert(
    fc.property(fc.integer({ min: 200, max: 299 }), fc.integer({ min: 1, max: 50 }), (statusCode, attempt) => {
      const decision = decideWebhookAttempt({
        answer: { ok: true, statusCode },
        attempt,
        now: 0,
        schedule: DEFAULT_WEBHOOK_RETRY_SCHEDULE_SECONDS,
        random: Math.random,
      });
      return decision.kind === "delivered";
    }),
  );
});

t.test("a failure waits the schedule's delay ±20 %, at least Retry-After up to twice it, then dies", async () => {
  fc.assert(
    fc.property(
      failure,
      fc.array(fc.integer({ min: 0, max: 100_000 }), { maxLength: 12 }),
      fc.integer({ min: 1, max: 14 }),
      fc.double({ min: 0, max: 0.999_999, noNaN: true }),
      fc.integer({ min: 0, max: 2 ** 40 }),
      (answer, schedule, attempt, draw, now) => {
        const decision = decideWebhookAttempt({ answer, attempt, now, schedule, random: () => draw });
        const delay = schedule[attempt - 1];
        if (delay === undefined) return decision.kind === "dead" && decision.reason.includes(answer.error);
        if (decision.kind !== "retry") return false;
        const waited = decision.atMs - now;
        const floor = Math.min(answer.retryAfterMs ?? 0, delay * 2000);
        return (
          waited >= Math.floor(delay * 800) &&
          waited <= Math.max(Math.ceil(delay * 1200), Math.ceil(floor)) + 1 &&
          waited >= floor
        );
      },
    ),
  );
});

t.test("an endpoint is disabled once it has failed for the whole span, not before", async () => {
  fc.assert(
    fc.property(
      fc.option(fc.integer({ min: 0, max: 2 ** 40 }), { nil: null }),
      fc.integer({ min: 0, max: 2 ** 40 }),
      fc.integer({ min: 1, max: 2 ** 30 }),
      (since, now, span) => shouldDisableEndpoint(since, now, span) === (since !== null && now - since >= span),
    ),
  );
});

t.test("a retry schedule is read from seconds separated by commas", async (t) => {
  t.same(parseRetrySchedule("5, 300,1800"), [5, 300, 1800]);
  t.same(parseRetrySchedule(""), []);
  t.same(parseRetrySchedule("0.05"), [0.05]);
  for (const bad of ["5,,6", "-1", "x", "5;6", "Infinity"]) t.throws(() => parseRetrySchedule(bad), bad);
  fc.assert(
    fc.property(fc.array(fc.integer({ min: 0, max: 1_000_000 }), { minLength: 1 }), (delays) => {
      const parsed = parseRetrySchedule(delays.join(","));
      return parsed.length === delays.length && parsed.every((d, i) => d === delays[i]);
    }),
  );
});

t.test("a webhook URL is https on a public host, unless in development", async (t) => {
  t.equal(webhookUrlProblem("https://hooks.example.com/notify?x=1", false), null);
  t.equal(webhookUrlProblem("https://203.0.114.7:8443/x", false), null, "a public address");
  for (const url of [
    "http://hooks.example.com/",
    "https://127.0.0.1/",
    "https://0.0.0.0/",
    "https://10.0.0.1/",
    "https://100.64.0.1/",
    "https://172.16.5.4/",
    "https://192.168.0.1/",
    "https://169.254.169.254/",
    "https://[::1]/",
    "https://[fe80::1]/",
    "https://[fc00::1]/",
    "https://[::ffff:10.0.0.1]/",
    "https://localhost/",
    "https://api.localhost/",
    "https://printer.local/",
    "https://metadata.google.internal/",
    "https://nodots/",
    "https://a:b@hooks.example.com/",
    "https://hooks.example.com/#frag",
    "javascript:alert(1)",
    "",
  ]) {
    t.not(webhookUrlProblem(url, false), null, url);
  }
  t.equal(webhookUrlProblem("http://127.0.0.1:3015/hooks/dev", true), null, "the development receiver");
  t.not(webhookUrlProblem("ftp://127.0.0.1/", true), null);
  // Any private IPv4 address is refused, in any of its spellings the URL parser accepts.
  fc.assert(
    fc.property(
      fc.oneof(
        fc.tuple(fc.constant(10), fc.nat(255), fc.nat(255), fc.nat(255)),
        fc.tuple(fc.constant(127), fc.nat(255), fc.nat(255), fc.nat(255)),
        fc.tuple(fc.constant(192), fc.constant(168), fc.nat(255), fc.nat(255)),
        fc.tuple(fc.constant(172), fc.integer({ min: 16, max: 31 }), fc.nat(255), fc.nat(255)),
      ),
      fc.boolean(),
      (octets, decimal) => {
        const host = decimal ? String(octets.reduce((n, o) => n * 256 + o, 0)) : octets.join(".");
        return webhookUrlProblem(`https://${host}/x`, false) !== null;
      },
    ),
  );
});

t.test(
  "a secret is Standard Webhooks' whsec_ and base64; an envelope carries id, type, time and sequence",
  async (t) => {
    const secret = newWebhookSecret();
    t.match(secret, /^whsec_[A-Za-z0-9+/]{32}$/);
    t.not(newWebhookSecret(), secret);
    t.same(webhookEnvelope({ id: 42, type: "channel.delivered", occurredAt: new Date(0), data: { a: 1 } }), {
      id: "evt_42",
      type: "channel.delivered",
      timestamp: "1970-01-01T00:00:00.000Z",
      sequence: 42,
      data: { a: 1 },
    });
  },
);

t.test("an event's recipient is the address its channel is sent to, and no other", async () => {
  const contact = fc.option(fc.emailAddress(), { nil: null });
  fc.assert(
    fc.property(
      fc.constantFrom("email", "sms", "push", "in_app", undefined, null),
      contact,
      fc.option(fc.string(), { nil: null }),
      (channel, email, phone) => {
        const shown = recipientOf(channel, { email, phone });
        if (channel === "email") return JSON.stringify(shown) === JSON.stringify({ email });
        if (channel === "sms") return JSON.stringify(shown) === JSON.stringify({ phone });
        if (channel === "push" || channel === "in_app") return Object.keys(shown).length === 0;
        return shown.email === email && shown.phone === phone;
      },
    ),
  );
});
