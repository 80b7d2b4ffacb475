import { randomUUID } from "node:crypto";
import { eventually, startTestStack } from "@notify/testing";
import t from "tap";

// One notification the whole way over the real processes: ingest -> Postgres + JetStream lane
// -> processor -> email work queue -> worker -> SendGrid sandbox -> status -> GET delivered; and
// the preferences a user changes (an unsubscribe link, the inbox's preference centre) honoured.
// The processor holds each user's profile for a minute here (PREFERENCE_CACHE_TTL_MS): an
// opt-out applies to the very next notification because ingest announces the change, not
// because the cache has aged out.
const { stack, auth } = await startTestStack(t, {
  partitions: 4,
  appSettings: { processor: { PREFERENCE_CACHE_TTL_MS: "60000" } },
});

const post = (body: unknown, key = randomUUID()) =>
  fetch(`${stack.baseUrl}/api/v1/notifications`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify(body),
  });

t.test("a notification is delivered by email and GET reports it completed, with the provider id", async (t) => {
  const response = await post({
    user_id: "user-123",
    category: "account",
    template_id: "welcome",
    data: { name: "Ada <3" },
    priority: "transactional",
    channels: ["email"],
  });
  t.equal(response.status, 202);
  const accepted = (await response.json()) as { notification_id: string; status: string };
  t.equal(accepted.status, "accepted");
  t.match(accepted.notification_id, /^[0-9a-f-]{36}$/);

  const view = await eventually(
    async () => {
      const r = await fetch(`${stack.baseUrl}/api/v1/notifications/${accepted.notification_id}`, { headers: auth });
      const body = (await r.json()) as {
        status: string;
        channels: Record<string, { status: string; provider_id: string | null; ts: string }>;
      };
      return body.channels.email?.status === "delivered" ? body : undefined;
    },
    20_000,
    "email delivered",
  );

  const sandbox = await fetch(
    `${stack.sandboxUrl}/sandbox/messages?custom_arg.notification_id=${accepted.notification_id}`,
  );
  const mails = (
    (await sandbox.json()) as {
      data: Array<{
        message_id: string;
        subject: string;
        to: Array<{ email: string }>;
        content: Array<{ type: string; value: string }>;
        custom_args: Record<string, string>;
      }>;
    }
  ).data;
  t.equal(mails.length, 1, "exactly one send reached the provider");
  const mail = mails[0];
  t.equal(view.status, "completed", "its only channel delivered: the notification reads completed");
  t.equal(view.channels.email?.provider_id, mail?.message_id, "provider id is SendGrid's X-Message-Id");
  t.equal(mail?.to[0]?.email, "user-123@example.com");
  t.equal(mail?.subject, "Welcome, Ada <3!", "subject rendered from the stored template");
  t.match(mail?.content.find((c) => c.type === "text/html")?.value ?? "", "Hello Ada &lt;3", "HTML body escapes data");
  t.equal(mail?.custom_args.channel, "email");
  t.ok(!Number.isNaN(Date.parse(view.channels.email?.ts ?? "")), "ts is a timestamp");
});

t.test("the same Idempotency-Key returns the same notification with 200 and sends nothing more", async (t) => {
  const key = randomUUID();
  const body = {
    user_id: "user-123",
    category: "account",
    template_id: "welcome",
    data: { name: "Bo" },
    priority: "transactional",
    channels: ["email"],
  };
  const first = (await (await post(body, key)).json()) as { notification_id: string };
  const again = await post(body, key);
  t.equal(again.status, 200);
  t.equal(again.headers.get("idempotent-replayed"), "true");
  t.same(await again.json(), { notification_id: first.notification_id, status: "accepted" });
  await eventually(
    async () => {
      const r = await fetch(`${stack.sandboxUrl}/sandbox/messages?custom_arg.notification_id=${first.notification_id}`);
      return ((await r.json()) as { data: unknown[] }).data.length === 1 ? true : undefined;
    },
    20_000,
    "one email",
  );
});

t.test("GET of an unknown notification is a 404 problem", async (t) => {
  const r = await fetch(`${stack.baseUrl}/api/v1/notifications/${randomUUID()}`, { headers: auth });
  t.equal(r.status, 404);
  t.equal(r.headers.get("content-type"), "application/problem+json");
  t.match(await r.json(), { status: 404, code: "not_found" });
});

t.test("an unknown template is refused with 400 naming the field", async (t) => {
  const r = await post({
    user_id: "u1",
    category: "account",
    template_id: "nope",
    data: {},
    priority: "transactional",
  });
  t.equal(r.status, 400);
  t.match(await r.json(), { code: "unknown_template", errors: [{ field: "template_id" }] });
});

t.test("one-click unsubscribe: the link a promotional email carries opts out, and the next is not sent", async (t) => {
  const promotion = {
    user_id: "user-123",
    category: "deals",
    template_id: "welcome",
    data: { name: "Ada" },
    priority: "promotional",
    channels: ["email"],
  };
  const mailsOf = async (id: string) => {
    const r = await fetch(`${stack.sandboxUrl}/sandbox/messages?custom_arg.notification_id=${id}`);
    return ((await r.json()) as { data: Array<{ headers: Record<string, string> }> }).data;
  };
  const channelOf = (id: string, status: string) =>
    eventually(async () => {
      const r = await fetch(`${stack.baseUrl}/api/v1/notifications/${id}`, { headers: auth });
      const email = ((await r.json()) as { channels: Record<string, { status: string; reason: string | null }> })
        .channels.email;
      return email?.status === status ? email : undefined;
    });
  const optOuts = async () => {
    const r = await fetch(`${stack.baseUrl}/api/v1/users/user-123/preferences`, { headers: auth });
    return ((await r.json()) as { category_optout: string[] }).category_optout;
  };

  const { notification_id: first } = (await (await post(promotion)).json()) as { notification_id: string };
  await channelOf(first, "delivered");
  const [mail] = await mailsOf(first);
  t.equal(mail?.headers["List-Unsubscribe-Post"], "List-Unsubscribe=One-Click");
  const link = /<(http[^>]+\/u\/[^>]+)>/.exec(mail?.headers["List-Unsubscribe"] ?? "")?.[1];
  if (link === undefined) throw new Error(`no unsubscribe link in ${JSON.stringify(mail?.headers)}`);

  const page = await fetch(link);
  t.equal(page.status, 200);
  t.match(await page.text(), /<form method="post">/, "GET shows a confirmation page");
  t.notOk((await optOuts()).includes("deals"), "and changes nothing");

  const click = await fetch(link, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: "List-Unsubscribe=One-Click",
  });
  t.equal(click.status, 200);
  t.ok((await optOuts()).includes("deals"), "POST opts the user out of the category");

  const { notification_id: next } = (await (await post(promotion)).json()) as { notification_id: string };
  const suppressed = await channelOf(next, "suppressed");
  t.equal(suppressed.reason, "category_opted_out");
  t.same(await mailsOf(next), [], "the provider received nothing for it");
});

t.test("a preference the user changes in the inbox's preference centre is one routing honours", async (t) => {
  const user = "centre-user";
  const contacts = await fetch(`${stack.baseUrl}/api/v1/users/${user}/contacts`, {
    method: "PUT",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ email: "centre-user@example.com" }),
  });
  t.equal(contacts.status, 200);
  const minted = await fetch(`${stack.baseUrl}/api/v1/users/${user}/inbox-tokens`, { method: "POST", headers: auth });
  const inbox = { "x-inbox-token": ((await minted.json()) as { token: string }).token };
  const change = (body: unknown) =>
    fetch(`${stack.baseUrl}/api/v1/inbox/preferences`, {
      method: "PATCH",
      headers: { ...inbox, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const send = async (category: string, channels: string[]) => {
    const body = { user_id: user, category, template_id: "welcome", data: { name: "Cy" }, priority: "transactional" };
    return ((await (await post({ ...body, channels })).json()) as { notification_id: string }).notification_id;
  };
  const channelOf = (id: string, channel: string) =>
    eventually(async () => {
      const r = await fetch(`${stack.baseUrl}/api/v1/notifications/${id}`, { headers: auth });
      const found = ((await r.json()) as { channels: Record<string, { status: string; reason: string | null }> })
        .channels[channel];
      return found && !["pending", "deferred", "retrying", "parked", "unsettled"].includes(found.status)
        ? found
        : undefined;
    });

  t.match(await channelOf(await send("account", ["email"]), "email"), { status: "delivered" });
  t.equal((await change({ channel_optout: ["email"] })).status, 200);
  t.match(
    await channelOf(await send("account", ["email"]), "email"),
    { status: "suppressed", reason: "opted_out" },
    "the next email after the user's opt-out",
  );
  t.equal((await change({ channel_optout: [], category_optout: ["deals"] })).status, 200);
  t.match(await channelOf(await send("account", ["email"]), "email"), { status: "delivered" }, "opted in again");
  t.match(
    await channelOf(await send("deals", ["in_app"]), "in_app"),
    { status: "suppressed", reason: "category_opted_out" },
    "a category the user refuses",
  );
  // security is critical in ingest as in the processor (both read CRITICAL_CATEGORIES).
  const locked = await change({ category_optout: ["deals", "security"] });
  t.equal(locked.status, 400);
  t.match(await locked.json(), { code: "validation_failed", detail: /"security" is a critical category/ });
  t.match(await channelOf(await send("security", ["in_app"]), "in_app"), { status: "delivered" });
});

t.test("every app stops cleanly on SIGTERM with exit code 0", async (t) => {
  for (const proc of stack.apps.values()) t.equal(await proc.stop(), 0, `${proc.name} exit code`);
});
