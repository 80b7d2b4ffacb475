import { generateKeyPairSync, randomUUID } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ChannelStatus, notificationStatus } from "@notify/core";
import { storeInboxItem } from "@notify/db";
import { startPlivoSandbox, startPushSandbox, startSendgridSandbox } from "@notify/devstack";
import { ChannelProvidersConfig, createChannelProviders, generateVapidKeys } from "@notify/providers";
import { eventually } from "@notify/testing";
import t from "tap";
import * as v from "valibot";
import { channelRow, recordSend, startReceipts } from "./support.js";

// One notification on all four channels through createChannelProviders (what the workers call)
// and the sandboxes, with the real SDKs; receipts then bounce its email. The worker's part (the
// status write after an accepted send) is played by recordSend.
const webhookKeys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const plivoCredentials = { authId: "MASANDBOX000000000000", authToken: "plivo-sandbox-token" };
const receipts = await startReceipts(t, {
  plivoAuthToken: plivoCredentials.authToken,
  sendgridPublicKey: webhookKeys.publicKey.export({ format: "der", type: "spki" }).toString("base64"),
});
const { sql } = receipts;
const vapid = generateVapidKeys();
const sendgrid = await startSendgridSandbox({
  apiKey: "SG.sandbox",
  eventWebhookUrl: `${receipts.url}/webhooks/sendgrid`,
  webhookPrivateKey: webhookKeys.privateKey,
});
const plivo = await startPlivoSandbox(plivoCredentials);
const push = await startPushSandbox({ vapidPublicKey: vapid.publicKey });
t.teardown(() => Promise.all([sendgrid.close(), plivo.close(), push.close()]));
const caFile = join(mkdtempSync(join(tmpdir(), "notify-four-")), "ca.pem");
writeFileSync(caFile, push.ca);

const providers = await createChannelProviders(
  v.parse(ChannelProvidersConfig, {
    EMAIL_PROVIDER: "sandbox",
    SENDGRID_API_KEY: "SG.sandbox",
    SENDGRID_BASE_URL: sendgrid.url,
    SMS_PROVIDER: "sandbox",
    PLIVO_AUTH_ID: plivoCredentials.authId,
    PLIVO_AUTH_TOKEN: plivoCredentials.authToken,
    PLIVO_BASE_URL: plivo.url,
    SMS_FROM: "+14155550100",
    PLIVO_REPORT_URL: `${receipts.url}/webhooks/plivo`,
    PUSH_PROVIDER: "sandbox",
    VAPID_SUBJECT: "mailto:ops@notify.example",
    VAPID_PUBLIC_KEY: vapid.publicKey,
    VAPID_PRIVATE_KEY: vapid.privateKey,
    PUSH_ALLOWED_HOSTS: "127.0.0.1",
    PUSH_ALLOW_PRIVATE_NETWORKS: "true",
    PUSH_CA_FILE: caFile,
  }),
  {
    timeoutMs: 5000,
    inAppStore: (m) =>
      storeInboxItem(sql, {
        userId: m.to,
        notificationId: m.notificationId,
        category: m.category,
        title: m.subject,
        body: m.body,
      }),
  },
);

t.test(
  "one notification is delivered on push, email, SMS and in-app; a bounce receipt bounces its email",
  async (t) => {
    const id = randomUUID();
    await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, 'shop', 'user-123', 'account', 'welcome', 'transactional', '{}', ${randomUUID()}, 'x', 0)`;
    const subscription = push.subscribe();
    const addresses = {
      push: JSON.stringify(subscription),
      email: "user-123@example.com",
      sms: "+14155550123",
      in_app: "user-123",
    } as const;
    for (const [channel, to] of Object.entries(addresses)) {
      await sql`insert into notification_channels (notification_id, channel, status) values (${id}, ${channel}, 'pending')`;
      const provider = providers[channel as keyof typeof addresses];
      if (provider === undefined) throw new Error(`no provider for ${channel}`);
      const result = await provider.send({
        notificationId: id,
        channel: channel as keyof typeof addresses,
        to,
        subject: channel === "sms" ? null : "Welcome",
        body: "Hello Ada",
        category: "account",
        priority: "transactional",
      });
      if (result.outcome !== "accepted") throw new Error(`${channel}: ${result.reason}`);
      await recordSend(sql, id, channel, provider.name, result.providerId);
    }

    t.equal(sendgrid.messages()[0]?.custom_args.notification_id, id);
    t.equal(plivo.messages()[0]?.dst, "+14155550123");
    t.match(JSON.parse(push.messages()[0]?.payload ?? "{}"), { notification_id: id, body: "Hello Ada" });
    const [inbox] = await sql`select body from inbox_items where notification_id = ${id}`;
    t.equal(inbox?.body, "Hello Ada");

    const email = await channelRow(sql, id, "email");
    await sendgrid.settled();
    await sendgrid.report({ message_id: email?.provider_id ?? "", event: "bounce" });
    await eventually(async () => ((await channelRow(sql, id, "email"))?.status === "bounced" ? true : undefined));
    await plivo.settled();
    const rows = await sql<{ channel: string; status: string }[]>`
    select channel, status from notification_channels where notification_id = ${id} order by channel`;
    t.same(
      rows.map((r) => [r.channel, r.status]),
      [
        ["email", "bounced"],
        ["in_app", "delivered"],
        ["push", "delivered"],
        ["sms", "delivered"],
      ],
    );
    t.equal(
      notificationStatus(rows.map((r) => r.status as ChannelStatus)),
      "partially_failed",
      "the notification's status, as GET /notifications/{id} derives it: three delivered, one bounced",
    );
    // A report that arrived before its send was recorded is applied by the receipts sweep.
    const applied = await eventually(
      async () => {
        const [sms] =
          await sql`select count(*)::int as n from provider_receipts where provider = 'plivo' and applied_at is not null`;
        return sms?.n === 2 ? sms.n : undefined;
      },
      15_000,
      "both Plivo reports applied",
    );
    t.equal(applied, 2, "Plivo's sent and delivered reports were verified and applied");
  },
);
