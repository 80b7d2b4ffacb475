import { randomUUID } from "node:crypto";
import { eventually, startTestStack } from "@notify/testing";
import t from "tap";

// The processing stage over the real processes: templates, contacts and preferences written
// through the API decide what the processor does, and GET /notifications/{id} shows every
// decision per channel: delivered, suppressed with its reason, deferred with its planned time.
const { stack, auth } = await startTestStack(t, { partitions: 4, env: { QUIET_HOURS_DROP_CATEGORIES: "flash_sale" } });

const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
  const response = await fetch(`${stack.baseUrl}/api/v1${path}`, {
    method,
    headers: { ...auth, ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
};
const notify = async (body: Record<string, unknown>) => {
  const { status, body: answer } = await call("POST", "/notifications", body, { "idempotency-key": randomUUID() });
  if (status !== 202) throw new Error(`POST answered ${status}: ${JSON.stringify(answer)}`);
  return answer.notification_id as string;
};
type Channels = Record<
  string,
  { status: string; reason: string | null; provider_id: string | null; next_attempt_at: string | null }
>;
/** The notification's top-level status and its channels, once routed (and `done`). */
const settled = (id: string, expected: number, done: (c: Channels) => boolean = () => true) =>
  eventually(
    async () => {
      const { body } = await call("GET", `/notifications/${id}`);
      const channels = body.channels as Channels;
      return Object.keys(channels).length === expected && done(channels)
        ? { status: body.status as string, channels }
        : undefined;
    },
    20_000,
    `notification ${id} routed`,
  );

// A quiet window in UTC around now: from two hours ago to three hours ahead.
const hhmm = (d: Date) => d.toISOString().slice(11, 16);
const now = new Date();
const quietEnd = new Date(Math.ceil((now.getTime() + 3 * 3_600_000) / 60_000) * 60_000);
const quiet = { start: hhmm(new Date(now.getTime() - 2 * 3_600_000)), end: hhmm(quietEnd), tz: "UTC" };

t.test("setup through the API: a template, contacts, preferences", async (t) => {
  const template = await call("PUT", "/templates/offer", {
    params: ["name"],
    variants: [
      {
        channel: "email",
        locale: "en",
        subject: "An offer for <%= it.name %>",
        body_template: "<p>Hi <%= it.name %></p>",
      },
      {
        channel: "email",
        locale: "fr",
        subject: "Une offre pour <%= it.name %>",
        body_template: "<p>Salut <%= it.name %></p>",
      },
      { channel: "sms", locale: "en", body_template: "Offer for <%= it.name %>" },
    ],
  });
  t.equal(template.status, 201);
  for (const user of ["night", "capped"]) {
    const contacts = await call("PUT", `/users/${user}/contacts`, {
      email: `${user}@example.com`,
      phone: "+15550001111",
    });
    t.equal(contacts.status, 200);
  }
  const prefs = await call("PUT", "/users/night/preferences", {
    channel_optout: ["sms"],
    category_optout: ["digest"],
    quiet_hours: quiet,
    locale: "fr-FR",
  });
  t.equal(prefs.status, 200);
  t.equal((await call("PUT", "/users/capped/preferences", { rate_cap_per_day: 1 })).status, 200);
});

t.test("every decision shows in the notification's per-channel status, and sums up in its status", async (t) => {
  const base = { user_id: "night", template_id: "offer", data: { name: "Zoé" } };
  const orders = await notify({ ...base, category: "orders", priority: "transactional", channels: ["email", "sms"] });
  const deals = await notify({ ...base, category: "deals", priority: "promotional" });
  const digest = await notify({ ...base, category: "digest", priority: "promotional", channels: ["email"] });
  const flash = await notify({ ...base, category: "flash_sale", priority: "promotional", channels: ["email"] });
  const security = await notify({ ...base, category: "security", priority: "promotional", channels: ["email", "sms"] });

  const delivered = (c: Channels) => c.email?.status === "delivered";
  t.match(
    await settled(orders, 2, delivered),
    {
      status: "completed",
      channels: {
        email: { status: "delivered", provider_id: String, next_attempt_at: null },
        sms: { status: "suppressed", reason: "opted_out" },
      },
    },
    "transactional inside quiet hours: sent; the opted-out channel is not",
  );
  t.match(
    await settled(deals, 2),
    {
      status: "processing",
      channels: {
        email: { status: "deferred", reason: "quiet_hours", next_attempt_at: quietEnd.toISOString() },
        sms: { status: "suppressed", reason: "opted_out" },
      },
    },
    "promotional inside quiet hours: deferred to the window's end",
  );
  t.match(await settled(digest, 1), {
    status: "suppressed",
    channels: { email: { status: "suppressed", reason: "category_opted_out" } },
  });
  t.match(
    await settled(flash, 1),
    { status: "suppressed", channels: { email: { status: "suppressed", reason: "quiet_hours" } } },
    "a drop category",
  );
  t.match(
    await settled(security, 2, (c) => delivered(c) && c.sms?.status === "delivered"),
    { status: "completed", channels: { email: { status: "delivered" }, sms: { status: "delivered" } } },
    "a critical category overrides every preference",
  );

  const mails = (await (
    await fetch(`${stack.sandboxUrl}/sandbox/messages?custom_arg.notification_id=${orders}`)
  ).json()) as {
    data: Array<{ subject: string }>;
  };
  t.equal(mails.data[0]?.subject, "Une offre pour Zoé", "rendered in the user's language (fr-FR falls back to fr)");
});

t.test("the daily cap: the first promotional is delivered, the next suppressed", async (t) => {
  const base = {
    user_id: "capped",
    template_id: "offer",
    data: { name: "Ada" },
    category: "deals",
    priority: "promotional",
  };
  const first = await notify({ ...base, channels: ["email"] });
  const second = await notify({ ...base, channels: ["email"] });
  t.match(await settled(first, 1, (c) => c.email?.status === "delivered"), {
    status: "completed",
    channels: { email: { status: "delivered" } },
  });
  t.match(await settled(second, 1), {
    status: "suppressed",
    channels: { email: { status: "suppressed", reason: "rate_cap" } },
  });
});
