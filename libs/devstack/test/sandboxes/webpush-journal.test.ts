import { createECDH, randomUUID } from "node:crypto";
import { appendFileSync, readFileSync } from "node:fs";
import { Agent, request } from "node:https";
import { join } from "node:path";
import { createWebPushProvider, type OutboundMessage } from "@notify/providers";
import t from "tap";
import webpush from "web-push";
import { createSandboxTls, type PushJournalEntry, startPushSandbox } from "../../src/index.js";
import { privateKeyText } from "../../src/sandboxes/webpush.js";
import { tempDir } from "./receiver.js";

const vapid = { subject: "mailto:ops@notify.example", ...webpush.generateVAPIDKeys() };
// The caller keeps the TLS material across restarts, as the dev stack does.
const tls = createSandboxTls();

const start = (journal: string, port?: number) =>
  startPushSandbox({ vapidPublicKey: vapid.publicKey, tls, journal, ...(port === undefined ? {} : { port }) });

// One sender per sandbox run: a kept-alive connection to the closed one would answer
// ECONNRESET once (transient, so the worker retries; not what these tests are about).
const newProvider = () =>
  createWebPushProvider({
    vapid,
    ca: tls.ca,
    allowedHosts: ["127.0.0.1"],
    allowPrivateNetworks: true,
    ttlSeconds: { transactional: 86_400, promotional: 3600 },
    timeoutMs: 2000,
  });

const message = (to: string, body = "Order 42 is on its way"): OutboundMessage => ({
  notificationId: randomUUID(),
  channel: "push",
  to,
  subject: "Your order shipped",
  body,
  category: "orders",
  priority: "transactional",
});

const agent = new Agent({ ca: tls.ca, keepAlive: false });

/** DELETE over HTTPS, trusting the sandbox's CA (fetch cannot be given one). */
const del = (url: string) =>
  new Promise<number>((resolve, reject) => {
    request(url, { method: "DELETE", agent }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    })
      .on("error", reject)
      .end();
  });

const entries = (path: string): PushJournalEntry[] =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as PushJournalEntry);

t.test("subscriptions and messages survive a restart on the same port", async (t) => {
  const journal = join(tempDir(t), "sandbox", "push.jsonl");
  let provider = newProvider();
  const first = await start(journal);
  const { id, ...subscription } = first.subscribe();
  t.match(await provider.send(message(JSON.stringify(subscription), "before")), { outcome: "accepted" });
  const before = first.messages();
  await first.close();
  t.match(entries(journal)[0], {
    type: "subscribe",
    id,
    private_key: /^[A-Za-z0-9_-]{43}$/,
    auth: /^[A-Za-z0-9_-]{22}$/,
  });

  const second = await start(journal, first.port);
  provider = newProvider();
  t.teardown(() => second.close());
  t.equal(second.url, first.url);
  t.same(second.messages(), before, "pushes of the earlier run");
  const result = await provider.send(message(JSON.stringify(subscription), "after"));
  t.match(result, { outcome: "accepted" }, "the old endpoint and keys still work");
  t.same(
    second.messages().map((m) => [m.subscription_id, JSON.parse(m.payload).body]),
    [
      [id, "before"],
      [id, "after"],
    ],
    "decrypted with the restored private key and auth secret",
  );

  // The web-push library on its own, as any sender would.
  const sent = await webpush.sendNotification(subscription, "plain", {
    vapidDetails: vapid,
    TTL: 60,
    agent,
  });
  t.equal(sent.statusCode, 201);
  t.equal(second.messages().at(-1)?.payload, "plain");
});

t.test("a removed subscription stays gone; DELETE /sandbox/messages survives a restart", async (t) => {
  const journal = join(tempDir(t), "push.jsonl");
  let provider = newProvider();
  const first = await start(journal);
  const kept = first.subscribe();
  const removed = first.subscribe();
  await provider.send(message(JSON.stringify(kept)));
  first.unsubscribe(removed.id);
  const viaHttp = first.subscribe();
  t.equal(await del(`${first.url}/sandbox/subscriptions/${viaHttp.id}`), 204);
  t.equal(await del(`${first.url}/sandbox/messages`), 204);
  await first.close();

  const second = await start(journal, first.port);
  provider = newProvider();
  t.teardown(() => second.close());
  t.same(second.messages(), []);
  t.match(await provider.send(message(JSON.stringify(kept))), { outcome: "accepted" });
  t.match(await provider.send(message(JSON.stringify(removed))), { outcome: "permanent", status: 410 });
  t.match(await provider.send(message(JSON.stringify(viaHttp))), { outcome: "permanent", status: 410 });
  t.same(
    entries(journal).map((e) => e.type),
    ["subscribe", "subscribe", "message", "unsubscribe", "subscribe", "unsubscribe", "clear", "message"],
  );
});

t.test("a torn last line (a crash mid-write) is skipped", async (t) => {
  const journal = join(tempDir(t), "push.jsonl");
  const first = await start(journal);
  const subscription = first.subscribe();
  await first.close();
  appendFileSync(journal, '{"type":"subscribe","id":"x","private_key":"abc');

  const second = await start(journal, first.port);
  t.teardown(() => second.close());
  t.match(await newProvider().send(message(JSON.stringify(subscription))), { outcome: "accepted" });
  t.equal(second.messages().length, 1);
});

t.test("a private key with a leading zero byte is journaled at its full length and restored", async (t) => {
  // One P-256 key in 256 starts with a zero byte, which Node's ECDH leaves out.
  let ecdh = createECDH("prime256v1");
  ecdh.generateKeys();
  for (let tries = 0; ecdh.getPrivateKey().length === 32 && tries < 20_000; tries++) {
    ecdh = createECDH("prime256v1");
    ecdh.generateKeys();
  }
  t.ok(ecdh.getPrivateKey().length < 32, "a short key was found");
  const text = privateKeyText(ecdh);
  t.match(text, /^[A-Za-z0-9_-]{43}$/);
  const restored = createECDH("prime256v1");
  restored.setPrivateKey(Buffer.from(text, "base64url"));
  t.same(restored.getPublicKey(), ecdh.getPublicKey(), "the same key");
});
