import { randomUUID } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  ChannelProvidersConfig,
  channelProviderEnv,
  checkChannelProviders,
  createChannelProviders,
} from "@notify/providers";
import t from "tap";
import * as v from "valibot";
import webpush from "web-push";
import { startPlivoSandbox, startPushSandbox, startSendgridSandbox } from "../../src/index.js";

const issues = (env: Record<string, string>) => {
  const result = v.safeParse(ChannelProvidersConfig, env, { abortEarly: false });
  return result.success ? [] : result.issues.map((i) => `${v.getDotPath(i)}: ${i.message}`);
};

t.test("every channel is off by default", async (t) => {
  const config = v.parse(ChannelProvidersConfig, {});
  t.same(await createChannelProviders(config, { timeoutMs: 1000 }), {});
});

t.test("each mode names what it is missing; a sandbox-only relaxation is refused for real providers", async (t) => {
  t.same(
    issues({
      EMAIL_PROVIDER: "sendgrid",
      SMS_PROVIDER: "plivo",
      PUSH_PROVIDER: "webpush",
      PUSH_ALLOW_PRIVATE_NETWORKS: "true",
    }),
    [
      "SENDGRID_API_KEY: is required when EMAIL_PROVIDER is not off",
      "PLIVO_AUTH_ID: is required when SMS_PROVIDER is not off",
      "PLIVO_AUTH_TOKEN: is required when SMS_PROVIDER is not off",
      "SMS_FROM: is required when SMS_PROVIDER is not off",
      "VAPID_SUBJECT: is required when PUSH_PROVIDER is not off",
      "VAPID_PUBLIC_KEY: is required when PUSH_PROVIDER is not off",
      "VAPID_PRIVATE_KEY: is required when PUSH_PROVIDER is not off",
      "PUSH_ALLOW_PRIVATE_NETWORKS: is only allowed with PUSH_PROVIDER=sandbox (SSRF)",
    ],
  );
  t.same(issues({ EMAIL_PROVIDER: "sendgrid", SENDGRID_API_KEY: "SG.x", SENDGRID_BASE_URL: "http://127.0.0.1:1" }), [
    "SENDGRID_BASE_URL: must be https for the real provider",
  ]);
  t.match(issues({ EMAIL_PROVIDER: "mailgun", VAPID_PUBLIC_KEY: "short" }), [
    /EMAIL_PROVIDER: must be sendgrid, sandbox or off/,
    /VAPID_PUBLIC_KEY/,
  ]);
  const Env = v.object({ ...channelProviderEnv, PORT: v.optional(v.string(), "3002") });
  const Wider = v.pipe(Env, checkChannelProviders<v.InferOutput<typeof Env>>());
  t.equal(
    v.safeParse(Wider, { SMS_PROVIDER: "sandbox" }).success,
    false,
    "the check composes into an app's own schema",
  );
});

t.test("sandbox mode: every channel's provider reaches its sandbox through the real SDK", async (t) => {
  const sendgrid = await startSendgridSandbox({ apiKey: "SG.sandbox" });
  const plivo = await startPlivoSandbox({ authId: "MASANDBOX", authToken: "sandbox-token" });
  const push = await startPushSandbox();
  t.teardown(() => Promise.all([sendgrid.close(), plivo.close(), push.close()]));
  const caFile = join(mkdtempSync(join(tmpdir(), "notify-ca-")), "ca.pem");
  writeFileSync(caFile, push.ca);
  const keys = webpush.generateVAPIDKeys();
  const config = v.parse(ChannelProvidersConfig, {
    EMAIL_PROVIDER: "sandbox",
    SENDGRID_API_KEY: "SG.sandbox",
    SENDGRID_BASE_URL: sendgrid.url,
    SMS_PROVIDER: "sandbox",
    PLIVO_AUTH_ID: "MASANDBOX",
    PLIVO_AUTH_TOKEN: "sandbox-token",
    PLIVO_BASE_URL: plivo.url,
    SMS_FROM: "+14155550100",
    PUSH_PROVIDER: "sandbox",
    VAPID_SUBJECT: "mailto:ops@notify.example",
    VAPID_PUBLIC_KEY: keys.publicKey,
    VAPID_PRIVATE_KEY: keys.privateKey,
    PUSH_ALLOWED_HOSTS: "127.0.0.1",
    PUSH_ALLOW_PRIVATE_NETWORKS: "true",
    PUSH_CA_FILE: caFile,
  });
  const providers = await createChannelProviders(config, { timeoutMs: 3000 });
  const base = {
    notificationId: randomUUID(),
    subject: "Hi",
    body: "Hello",
    category: "account",
    priority: "transactional" as const,
  };
  t.match(await providers.email?.send({ ...base, channel: "email", to: "ada@example.com" }), { outcome: "accepted" });
  t.match(await providers.sms?.send({ ...base, channel: "sms", to: "+447700900123", subject: null }), {
    outcome: "accepted",
  });
  t.match(await providers.push?.send({ ...base, channel: "push", to: JSON.stringify(push.subscribe()) }), {
    outcome: "accepted",
  });
  t.equal(sendgrid.messages().length, 1);
  t.equal(plivo.messages().length, 1);
  t.equal(push.messages().length, 1);
});
