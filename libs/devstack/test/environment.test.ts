import fc from "fast-check";
import t from "tap";
import { appEnvironment, realProviders } from "../src/stack.js";

// What reaches the apps from `npm start` and `turbo dev`: the user's settings pass through, a
// channel with real provider credentials uses the real provider, the others their sandboxes.
const sandboxes = {
  email: { EMAIL_PROVIDER: "sandbox", SENDGRID_API_KEY: "SG.sandbox", SENDGRID_BASE_URL: "http://127.0.0.1:1" },
  sms: {
    SMS_PROVIDER: "sandbox",
    PLIVO_AUTH_ID: "MASANDBOX",
    PLIVO_AUTH_TOKEN: "t",
    PLIVO_BASE_URL: "http://127.0.0.1:2",
  },
  push: { PUSH_PROVIDER: "sandbox", VAPID_PRIVATE_KEY: "sandbox-key", PUSH_CA_FILE: "/ca.pem" },
};
const compose = (user: Record<string, string | undefined>) =>
  appEnvironment({
    user,
    defaults: { LOG_LEVEL: "info", HOST: "127.0.0.1", LANE_PARTITIONS: "16" },
    sandboxes,
    decided: { DATABASE_URL: "postgres://embedded", NATS_URL: "nats://own", NATS_NAMESPACE: "" },
  });

t.test("with nothing set, every channel goes to its sandbox", async (t) => {
  const env = compose({});
  t.match(env, { EMAIL_PROVIDER: "sandbox", SMS_PROVIDER: "sandbox", PUSH_PROVIDER: "sandbox", LOG_LEVEL: "info" });
  t.same(realProviders({}), { email: null, sms: null, push: null });
});

t.test("a real SendGrid key sends email for real; SMS and push stay on their sandboxes", async (t) => {
  const env = compose({ SENDGRID_API_KEY: "SG.real", EMAIL_FROM: "me@example.com" });
  t.equal(env.SENDGRID_API_KEY, "SG.real");
  t.equal(env.EMAIL_PROVIDER, "sendgrid", "the workers are told to use the real provider");
  t.equal(env.SENDGRID_BASE_URL, undefined, "not pointed at the sandbox");
  t.equal(env.EMAIL_FROM, "me@example.com");
  t.match(env, { SMS_PROVIDER: "sandbox", PUSH_PROVIDER: "sandbox" });
  t.same(realProviders({ SENDGRID_API_KEY: "SG.real" }), { email: "sendgrid", sms: null, push: null });
});

t.test("Plivo needs both its id and token to count as configured; push needs a VAPID key", async (t) => {
  t.same(realProviders({ PLIVO_AUTH_ID: "MA1" }).sms, null);
  t.same(realProviders({ PLIVO_AUTH_ID: "MA1", PLIVO_AUTH_TOKEN: "x" }).sms, "plivo");
  t.same(realProviders({ VAPID_PRIVATE_KEY: "k" }).push, "webpush");
});

t.test("an explicit provider setting wins: off stays off, sandbox stays sandbox", async (t) => {
  t.same(realProviders({ EMAIL_PROVIDER: "off", SENDGRID_API_KEY: "SG.x" }).email, "off");
  t.equal(compose({ EMAIL_PROVIDER: "off" }).EMAIL_PROVIDER, "off");
  t.equal(compose({ EMAIL_PROVIDER: "sandbox", SENDGRID_API_KEY: "SG.real" }).SENDGRID_API_KEY, "SG.sandbox");
});

t.test("any other setting reaches the apps; the stack's own decisions cannot be overridden by accident", async (t) => {
  fc.assert(
    fc.property(
      fc.dictionary(
        fc
          .stringMatching(/^[A-Z][A-Z0-9_]{0,20}$/)
          .filter((k) => !/PROVIDER|SENDGRID|PLIVO|VAPID|PUSH_|SMS_|EMAIL_/.test(k)),
        fc.string({ maxLength: 20 }),
      ),
      (user) => {
        const env = compose(user);
        for (const [key, value] of Object.entries(user)) {
          if (!["DATABASE_URL", "NATS_URL", "NATS_NAMESPACE"].includes(key)) t.equal(env[key], value);
        }
        t.equal(env.DATABASE_URL, "postgres://embedded");
      },
    ),
    { numRuns: 50 },
  );
  t.equal(compose({ LOG_LEVEL: "debug" }).LOG_LEVEL, "debug", "a log level, for one");
});
