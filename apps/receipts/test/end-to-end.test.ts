import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import https from "node:https";
import { join } from "node:path";
import { eventually, startTestStack } from "@notify/testing";
import t from "tap";

// The whole service over the real processes: one notification requested on all four channels
// is delivered through the SendGrid, Plivo and Web Push sandboxes and the in-app inbox; the
// sandboxes post their signed receipts to apps/receipts, and a bounce reported later moves the
// delivered email to bounced in GET /notifications/{id} and suppresses the address.
const { stack, dataDir, auth } = await startTestStack(t);

interface ChannelView {
  status: string;
  provider_id: string | null;
  reason: string | null;
}

const channel = (id: string, name: string, status: string) =>
  eventually(
    async () => {
      const r = await fetch(`${stack.baseUrl}/api/v1/notifications/${id}`, { headers: auth });
      const view = (await r.json()) as { channels: Record<string, ChannelView> };
      return view.channels[name]?.status === status ? view.channels[name] : undefined;
    },
    30_000,
    `${name} ${status}`,
  );

/** The notification's top-level status, as GET /notifications/{id} shows it. */
const statusOf = async (id: string) =>
  ((await (await fetch(`${stack.baseUrl}/api/v1/notifications/${id}`, { headers: auth })).json()) as { status: string })
    .status;

/** Asks for the welcome notification to user-123 on these channels; its notification id. */
async function send(name: string, channels: string[]): Promise<string> {
  const response = await fetch(`${stack.baseUrl}/api/v1/notifications`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json", "idempotency-key": randomUUID() },
    body: JSON.stringify({
      user_id: "user-123",
      category: "account",
      template_id: "welcome",
      data: { name },
      priority: "transactional",
      channels,
    }),
  });
  if (response.status !== 202) throw new Error(`POST answered ${response.status}`);
  return ((await response.json()) as { notification_id: string }).notification_id;
}

t.test("an email delivered through the pipeline bounces on the provider's signed receipt", async (t) => {
  const id = await send("Ada", ["email"]);
  const delivered = await channel(id, "email", "delivered");
  if (delivered.provider_id === null) throw new Error("no provider id");
  t.equal(await statusOf(id), "completed", "its only channel delivered");

  // The sandbox's own processed and delivered events reached receipts and were verified.
  const posts = await eventually(async () => {
    const r = await fetch(`${stack.sandboxes.sendgrid}/sandbox/events`);
    const data = ((await r.json()) as { data: Array<{ answer: number; events: Array<{ notification_id?: string }> }> })
      .data;
    const mine = data.filter((p) => p.events.some((e) => e.notification_id === id));
    return mine.length > 0 ? mine : undefined;
  });
  t.same(
    posts.map((p) => p.answer),
    [200],
  );

  const bounce = await fetch(`${stack.sandboxes.sendgrid}/sandbox/events`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ message_id: delivered.provider_id, event: "bounce" }),
  });
  t.equal(bounce.status, 200);
  const bounced = await channel(id, "email", "bounced");
  t.match(bounced.reason, /^hard bounce: 5\.1\.1 550/);
  t.equal(bounced.provider_id, delivered.provider_id);
  t.equal(await statusOf(id), "failed", "its only channel bounced: completed became failed");

  // The hard bounce put the address on the suppression list for every client: the next email to
  // it is not sent.
  const entry = `${stack.baseUrl}/api/v1/suppressions/email/${encodeURIComponent("user-123@example.com")}`;
  const listed = await eventually(async () => {
    const r = await fetch(entry, { headers: auth });
    return r.status === 200 ? ((await r.json()) as { entries: Array<{ reason: string; scope: string }> }) : undefined;
  });
  t.match(listed.entries, [{ reason: "hard_bounce", scope: "all_clients" }]);
  const sentBefore = await sendgridMessages();
  const nextId = await send("Ada", ["email"]);
  const suppressed = await channel(nextId, "email", "suppressed");
  t.equal(suppressed.reason, "address_suppressed");
  t.equal(await sendgridMessages(), sentBefore, "the provider received nothing for it");

  // An operator lifts it (the user fixed their mailbox); the next test mails the address again.
  t.equal((await fetch(`${entry}?scope=all_clients`, { method: "DELETE", headers: auth })).status, 204);
});

/** How many messages the SendGrid sandbox has received. */
async function sendgridMessages(): Promise<number> {
  const r = await fetch(`${stack.sandboxes.sendgrid}/sandbox/messages`);
  return ((await r.json()) as { data: unknown[] }).data.length;
}

t.test("one notification on all four channels is delivered on all four, then its email bounces", async (t) => {
  const id = await send("Grace", ["email", "sms", "push", "in_app"]);

  const results = Object.fromEntries(
    await Promise.all(
      ["email", "sms", "push", "in_app"].map(async (name) => [name, await channel(id, name, "delivered")] as const),
    ),
  );
  for (const [name, result] of Object.entries(results)) t.ok(result.provider_id, `${name} has a provider id`);
  t.equal(await statusOf(id), "completed", "delivered on all four");

  const sms = (await (await fetch(`${stack.sandboxes.plivo}/sandbox/messages`)).json()) as {
    data: Array<{ message_uuid: string; text: string }>;
  };
  const text = sms.data.find((m) => m.message_uuid === results.sms?.provider_id);
  t.equal(text?.text, "Hello Grace, thanks for joining.", "the SMS sandbox received the rendered text");

  // The push sandbox speaks HTTPS under its own CA, which the stack wrote for the workers.
  const pushes = JSON.parse(
    await new Promise<string>((resolve, reject) => {
      https
        .get(
          `${stack.sandboxes.push}/sandbox/messages`,
          { ca: readFileSync(join(dataDir, "push-sandbox-ca.pem")) },
          (res) => {
            let body = "";
            res.on("data", (chunk) => (body += chunk)).on("end", () => resolve(body));
          },
        )
        .on("error", reject);
    }),
  ) as { data: Array<{ payload: string }> };
  t.ok(
    pushes.data.some((m) => m.payload.includes("Hello Grace!")),
    "the push sandbox decrypted the rendered payload",
  );

  const bounce = await fetch(`${stack.sandboxes.sendgrid}/sandbox/events`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ message_id: results.email?.provider_id, event: "bounce" }),
  });
  t.equal(bounce.status, 200);
  await channel(id, "email", "bounced");
  const view = (await (await fetch(`${stack.baseUrl}/api/v1/notifications/${id}`, { headers: auth })).json()) as {
    status: string;
    channels: Record<string, ChannelView>;
  };
  t.same(
    Object.fromEntries(Object.entries(view.channels).map(([name, c]) => [name, c.status])),
    { email: "bounced", sms: "delivered", push: "delivered", in_app: "delivered" },
    "only the email moved",
  );
  t.equal(view.status, "partially_failed", "three delivered, one bounced");
});
