import { randomUUID } from "node:crypto";
import { startWebhookReceiver } from "@notify/devstack";
import { eventually, startTestStack } from "@notify/testing";
import { Webhook } from "standardwebhooks";
import t from "tap";

// The whole service with a client's webhook endpoint on the development stack's receiver: every
// change of a notification reaches it, signed per Standard Webhooks (checked with the reference
// library), and another client hears nothing of it.
const receiver = await startWebhookReceiver();
t.teardown(() => receiver.close());
const { stack, auth } = await startTestStack(t, {
  appSettings: { processor: { WEBHOOK_POLL_INTERVAL_MS: "100" } },
});
const api = (path: string, init: RequestInit = {}) =>
  fetch(`${stack.baseUrl}/api/v1${path}`, {
    ...init,
    headers: { ...auth, "content-type": "application/json", ...(init.headers as Record<string, string>) },
  });

const notify = async (headers: Record<string, string> = auth) => {
  const res = await fetch(`${stack.baseUrl}/api/v1/notifications`, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json", "idempotency-key": randomUUID() },
    body: JSON.stringify({
      user_id: "user-123",
      template_id: "welcome",
      category: "account",
      priority: "transactional",
      channels: ["email"],
      data: { name: "Ada" },
    }),
  });
  t.equal(res.status, 202, "accepted");
  return ((await res.json()) as { notification_id: string }).notification_id;
};

t.test("a registered endpoint hears a notification's whole life, signed", async (t) => {
  const created = await api("/webhook-endpoints", {
    method: "POST",
    body: JSON.stringify({ url: `${receiver.url}/hooks/main`, description: "all events" }),
  });
  t.equal(created.status, 201);
  const endpoint = (await created.json()) as { id: string; secret: string; status: string; event_types: unknown };
  t.match(endpoint.secret, /^whsec_[A-Za-z0-9+/=]+$/);
  t.equal(endpoint.status, "enabled");
  t.equal(endpoint.event_types, null, "every type");
  receiver.setSecrets("main", [endpoint.secret]);

  const id = await notify();
  const types = ["notification.accepted", "channel.delivered", "notification.completed"];
  const mine = () =>
    receiver
      .received("main")
      .filter((r) => (r.body as { data?: { notification_id?: string } }).data?.notification_id === id);
  await eventually(
    async () => {
      const seen = mine().map((r) => r.type);
      for (const type of types) if (!seen.includes(type)) throw new Error(`no ${type} yet: ${seen.join(", ")}`);
      return true;
    },
    30_000,
    "the notification's events",
  );
  const posts = mine();
  t.ok(
    posts.every((p) => p.verified),
    "every post verifies with the standardwebhooks reference library",
  );
  for (const post of posts) {
    const body = post.body as {
      id: string;
      type: string;
      sequence: number;
      timestamp: string;
      data: Record<string, unknown>;
    };
    t.equal(post.webhook_id, body.id, "webhook-id is the event's id");
    t.equal(body.data.client_id, "dev", "the client's own event");
    t.equal(body.data.user_id, "user-123");
    t.notOk(JSON.stringify(body).includes("@example.com"), "no address in an event");
  }
  const sequence = (type: string) =>
    (posts.find((p) => p.type === type)?.body as { sequence: number } | undefined)?.sequence ?? 0;
  t.ok(sequence("notification.accepted") < sequence("channel.delivered"), "sequence follows causality");
  t.ok(sequence("channel.delivered") < sequence("notification.completed"));
  const completed = posts.find((p) => p.type === "notification.completed")?.body as { data: Record<string, unknown> };
  t.equal(completed.data.status, "completed");
  t.same(completed.data.channels, { email: { status: "delivered", reason: null } });

  // A verifier with the secret sees through a tampered body.
  const post = posts[0];
  t.ok(post);
  const wh = new Webhook(endpoint.secret);
  t.throws(
    () =>
      wh.verify(`${JSON.stringify(post?.body)} `, {
        "webhook-id": post?.webhook_id ?? "",
        "webhook-timestamp": post?.webhook_timestamp ?? "",
        "webhook-signature": "v1,AAAA",
      }),
    "a wrong signature is refused",
  );

  const attempts = await api(`/webhook-endpoints/${endpoint.id}/attempts`);
  t.equal(attempts.status, 200);
  const list = (await attempts.json()) as { data: Array<{ status_code: number; event_type: string }> };
  t.ok(list.data.length >= 3);
  t.ok(list.data.every((a) => a.status_code === 204));

  // A replay of the last minutes posts the notification's events again, each with its webhook-id.
  const since = new Date(Date.now() - 600_000).toISOString();
  const replay = await api(`/webhook-endpoints/${endpoint.id}/replay`, {
    method: "POST",
    body: JSON.stringify({ since }),
  });
  t.equal(replay.status, 202);
  t.ok(((await replay.json()) as { replayed: number }).replayed >= posts.length, "every event of the range");
  await eventually(
    async () =>
      posts.every((p) => mine().filter((m) => m.webhook_id === p.webhook_id).length >= 2) ? true : undefined,
    30_000,
    "the replayed posts",
  );
  // Each replayed post is listed among the attempts: the first of its event's second run.
  type Attempt = { event_id: string; run: number; attempt: number; status_code: number | null };
  await eventually(
    async () => {
      const { data } = (await (await api(`/webhook-endpoints/${endpoint.id}/attempts?limit=500`)).json()) as {
        data: Attempt[];
      };
      const listed = (p: (typeof posts)[number], run: number) =>
        data.some((a) => a.event_id === p.webhook_id && a.run === run && a.attempt === 1 && a.status_code === 204);
      return posts.every((p) => listed(p, 0) && listed(p, 1)) ? true : undefined;
    },
    30_000,
    "the replay's attempts listed by GET …/attempts",
  );

  // POST …/test: a ping to this endpoint alone, signed like every event.
  const ping = await api(`/webhook-endpoints/${endpoint.id}/test`, { method: "POST" });
  t.equal(ping.status, 202);
  const { event_id } = (await ping.json()) as { event_id: string };
  const pinged = await eventually(
    async () => receiver.received("main").find((r) => r.webhook_id === event_id),
    30_000,
    "the ping",
  );
  t.equal(pinged.type, "ping");
  t.ok(pinged.verified, "the ping verifies");
});
