import { randomUUID } from "node:crypto";
import { isPrivateAddress } from "@notify/core";
import {
  createWebPushProvider,
  endpointRefusal,
  hostAllowed,
  type OutboundMessage,
  pushTopic,
  type WebPushConfig,
} from "@notify/providers";
import fc from "fast-check";
import t from "tap";
import webpush from "web-push";
import { startPushSandbox } from "../../src/index.js";

const vapid = { subject: "mailto:ops@notify.example", ...webpush.generateVAPIDKeys() };
const sandbox = await startPushSandbox({ vapidPublicKey: vapid.publicKey });
t.teardown(() => sandbox.close());
t.beforeEach(() => sandbox.reset());

const provider = (overrides: Partial<WebPushConfig> = {}) =>
  createWebPushProvider({
    vapid,
    ca: sandbox.ca,
    allowedHosts: ["127.0.0.1"],
    allowPrivateNetworks: true,
    ttlSeconds: { transactional: 86_400, promotional: 3600 },
    timeoutMs: 2000,
    ...overrides,
  });

const message = (to: string, overrides: Partial<OutboundMessage> = {}): OutboundMessage => ({
  notificationId: randomUUID(),
  channel: "push",
  to,
  subject: "Your order shipped",
  body: "Order 42 is on its way",
  category: "orders",
  priority: "transactional",
  ...overrides,
});

t.test("a transactional push is encrypted, VAPID-signed and decrypts at the push service", async (t) => {
  const subscription = sandbox.subscribe();
  const msg = message(JSON.stringify(subscription));
  const result = await provider().send(msg);
  const [received] = sandbox.messages();
  if (!received) throw new Error("the sandbox received nothing");
  t.same(result, { outcome: "accepted", providerId: `${sandbox.url}/message/${received.message_id}` });
  t.same(JSON.parse(received.payload), {
    notification_id: msg.notificationId,
    title: "Your order shipped",
    body: "Order 42 is on its way",
    category: "orders",
  });
  t.equal(received.ttl, 86_400);
  t.equal(received.urgency, "high");
  t.equal(received.topic, null, "every transactional message counts: no replacement");
  t.equal(received.vapid.aud, sandbox.url);
  t.equal(received.vapid.sub, "mailto:ops@notify.example");
  t.ok(received.vapid.exp <= Date.now() / 1000 + 24 * 3600);
});

t.test("a promotional push is low urgency, short-lived and replaceable by topic", async (t) => {
  const subscription = sandbox.subscribe();
  await provider().send(message(JSON.stringify(subscription), { priority: "promotional", category: "offers.weekly" }));
  t.match(sandbox.messages()[0], { ttl: 3600, urgency: "low", topic: "offers-weekly" });
  t.equal(pushTopic("x".repeat(64)).length, 32);
  fc.assert(fc.property(fc.string({ minLength: 1, maxLength: 64 }), (c) => /^[A-Za-z0-9_-]{1,32}$/.test(pushTopic(c))));
});

t.test("failures are classified: gone subscriptions are to be removed", async (t) => {
  const subscription = sandbox.subscribe();
  const to = JSON.stringify(subscription);
  const cases: Array<[number, Record<string, unknown>]> = [
    [404, { outcome: "permanent", addressGone: true }],
    [410, { outcome: "permanent", addressGone: true }],
    [413, { outcome: "permanent", reason: /too large/ }],
    [400, { outcome: "permanent" }],
    [429, { outcome: "transient", retryAfterMs: 7000 }],
    [500, { outcome: "transient" }],
    [503, { outcome: "transient" }],
  ];
  for (const [status, expected] of cases) {
    sandbox.fault({ status, times: 1, retry_after_seconds: 7 });
    t.match(await provider().send(message(to)), { status, ...expected }, String(status));
  }
  sandbox.unsubscribe(subscription.id);
  const removed: string[] = [];
  const removing = provider({
    onSubscriptionGone: async (endpoint) => {
      removed.push(endpoint);
    },
  });
  t.match(await removing.send(message(to)), { outcome: "permanent", status: 410, addressGone: true });
  t.same(removed, [subscription.endpoint], "the gone subscription is handed over for removal");
  t.equal(sandbox.messages().length, 0);
});

t.test("slow, unreachable or untrusted push services are transient; bad input is permanent", async (t) => {
  const to = JSON.stringify(sandbox.subscribe());
  sandbox.fault({ delay_ms: 1500, times: 1 });
  const slow = await provider({ timeoutMs: 300 }).send(message(to));
  t.match(slow, { outcome: "transient", reason: /timed out/ });
  t.notOk("notSent" in slow, "a timeout may have been accepted: not marked as never sent");
  const { ca: _ca, ...withoutCa } = {
    vapid,
    ca: "",
    allowedHosts: ["127.0.0.1"],
    allowPrivateNetworks: true,
    ttlSeconds: { transactional: 60, promotional: 60 },
    timeoutMs: 2000,
  };
  t.match(await createWebPushProvider(withoutCa).send(message(to)), {
    outcome: "transient",
    reason: /unreachable/,
    notSent: true,
  });
  const closed = JSON.stringify({ ...JSON.parse(to), endpoint: "https://127.0.0.1:1/push/x" });
  t.match(await provider().send(message(closed)), { outcome: "transient", reason: /ECONNREFUSED/, notSent: true });
  t.match(await provider().send(message("not json")), { outcome: "permanent", addressGone: true });
  t.match(await provider().send(message(to, { body: "x".repeat(4000) })), { outcome: "permanent", reason: /payload/ });
  t.match(await provider({ vapid: { ...vapid, ...webpush.generateVAPIDKeys() } }).send(message(to)), {
    outcome: "permanent",
    status: 401,
  });
  t.equal(sandbox.messages().length, 0);
});

t.test("SSRF: only allowed push services, never private addresses unless configured", async (t) => {
  const subscription = sandbox.subscribe();
  const at = (endpoint: string) => JSON.stringify({ ...subscription, endpoint });
  const strict = provider({ allowedHosts: ["127.0.0.1", "localhost", "*.push.example"], allowPrivateNetworks: false });
  t.match(await strict.send(message(at(subscription.endpoint))), { outcome: "permanent", reason: /private address/ });
  const viaName = subscription.endpoint.replace("127.0.0.1", "localhost");
  t.match(await strict.send(message(at(viaName))), { outcome: "permanent", reason: /resolves to a private address/ });
  t.match(await provider({ allowedHosts: ["fcm.googleapis.com"] }).send(message(at(subscription.endpoint))), {
    outcome: "permanent",
    reason: /not allowed/,
  });
  t.equal(sandbox.messages().length, 0);

  const policy = { allowedHosts: ["*"], allowPrivateNetworks: false };
  t.match(endpointRefusal("http://fcm.googleapis.com/x", policy), /not https/);
  t.match(endpointRefusal("https://user:pw@fcm.googleapis.com/x", policy), /credentials/);
  t.match(endpointRefusal("https://169.254.169.254/latest", policy), /private/);
  t.match(endpointRefusal("https://[::1]/x", policy), /private/);
  t.match(endpointRefusal("https://[::ffff:127.0.0.1]/x", policy), /private/);
  t.equal(endpointRefusal("https://fcm.googleapis.com/fcm/send/abc", policy), undefined);
  t.ok(hostAllowed("updates.push.services.mozilla.com", ["*.push.services.mozilla.com"]));
  t.notOk(hostAllowed("evilpush.services.mozilla.com.attacker.net", ["*.push.services.mozilla.com"]));
  t.notOk(hostAllowed("push.services.mozilla.com", ["*.push.services.mozilla.com"]));
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 255 }),
      fc.integer({ min: 0, max: 255 }),
      fc.integer({ min: 0, max: 255 }),
      (a, b, c) =>
        [`10.${a}.${b}.${c}`, `127.${a}.${b}.${c}`, `192.168.${a}.${b}`, `172.${16 + (a % 16)}.${b}.${c}`].every(
          isPrivateAddress,
        ),
    ),
  );
  t.notOk(isPrivateAddress("142.250.74.106"));
});
