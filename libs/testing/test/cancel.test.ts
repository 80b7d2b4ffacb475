import { randomUUID } from "node:crypto";
import postgres from "postgres";
import t from "tap";
import { eventually, startTestStack } from "../src/index.js";

// POST /api/v1/notifications/{id}/cancel over the real processes (the four apps, the SendGrid
// sandbox, PostgreSQL and NATS): a notification held for quiet hours and canceled never reaches
// the provider, while its twin, left alone, is sent when the window ends; one already delivered
// stays delivered.
const { stack, auth } = await startTestStack(t, { env: { DEFERRED_POLL_INTERVAL_MS: "200" } });
const sql = postgres(stack.databaseUrl, { max: 1, onnotice: () => {} });
t.teardown(() => sql.end());

const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
  const response = await fetch(`${stack.baseUrl}/api/v1${path}`, {
    method,
    headers: { ...auth, ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
};
const notify = async (priority: "transactional" | "promotional") => {
  const { status, body } = await call(
    "POST",
    "/notifications",
    {
      user_id: "night",
      category: "news",
      template_id: "welcome",
      data: { name: "Ada" },
      priority,
      channels: ["email"],
    },
    { "idempotency-key": randomUUID() },
  );
  if (status !== 202) throw new Error(`POST answered ${status}: ${JSON.stringify(body)}`);
  return body.notification_id as string;
};
type Email = { status: string; reason: string | null; next_attempt_at: string | null };
const emailOf = (id: string, done: (email: Email) => boolean, timeoutMs = 20_000) =>
  eventually(
    async () => {
      const { body } = await call("GET", `/notifications/${id}`);
      const email = (body.channels as Record<string, Email>).email;
      return email && done(email) ? { status: body.status as string, email } : undefined;
    },
    timeoutMs,
    `notification ${id}'s email`,
  );
const sentTo = async (id: string) =>
  (
    (await (await fetch(`${stack.sandboxUrl}/sandbox/messages`)).json()) as {
      data: Array<{ custom_args: Record<string, string> }>;
    }
  ).data.filter((m) => m.custom_args.notification_id === id).length;

// A quiet window in UTC from two hours ago to the next whole minute at least 10 s away (quiet
// hours are minutes of a wall clock): the setup and the cancel take a second or two.
const hhmm = (d: Date) => d.toISOString().slice(11, 16);
const now = Date.now();
const windowEnd = new Date(Math.ceil((now + 10_000) / 60_000) * 60_000);
const quiet = { start: hhmm(new Date(now - 2 * 3_600_000)), end: hhmm(windowEnd), tz: "UTC" };

t.test("setup: the user's address and quiet hours, through the API", async (t) => {
  t.equal((await call("PUT", "/users/night/contacts", { email: "night@example.com" })).status, 200);
  t.equal((await call("PUT", "/users/night/preferences", { quiet_hours: quiet })).status, 200);
});

t.test("canceled while held for quiet hours: never sent after the window ends; its twin is", async (t) => {
  const canceled = await notify("promotional");
  const twin = await notify("promotional");
  for (const id of [canceled, twin]) {
    t.match(await emailOf(id, (e) => e.status === "deferred"), {
      status: "processing",
      email: { reason: "quiet_hours", next_attempt_at: windowEnd.toISOString() },
    });
  }
  const timers = async (id: string) =>
    (await sql`select 1 from deferred_notifications where notification_id = ${id}`).length;
  t.equal(await timers(canceled), 1, "held by its deferral timer");

  const answer = await call("POST", `/notifications/${canceled}/cancel`);
  t.equal(answer.status, 200);
  t.match(answer.body, {
    status: "canceled",
    channels: { email: { status: "canceled", reason: "canceled_by_client", next_attempt_at: null } },
    cancel: { email: { result: "canceled", why: null } },
  });
  t.equal(await timers(canceled), 0, "its timer is gone");
  t.equal(await timers(twin), 1, "its twin's is not");

  // The window ends: the twin is released and sent; the canceled one never is.
  t.match(await emailOf(twin, (e) => e.status === "delivered", windowEnd.getTime() - Date.now() + 30_000), {
    status: "completed",
  });
  await eventually(async () => ((await sentTo(twin)) === 1 ? true : undefined), 10_000, "the twin at the sandbox");
  t.ok(Date.now() >= windowEnd.getTime(), "after the window's end");
  // A few more release rounds, then the sandbox is read again.
  await new Promise((resolve) => setTimeout(resolve, 2000));
  t.equal(await sentTo(canceled), 0, "the canceled one never reached the provider");
  t.match(await emailOf(canceled, () => true), { status: "canceled", email: { status: "canceled" } });
  const again = await call("POST", `/notifications/${canceled}/cancel`);
  t.match(again, { status: 200, body: { status: "canceled", cancel: { email: { result: "already_canceled" } } } });
});

t.test("a notification already delivered stays delivered", async (t) => {
  // Transactional: sent inside the window too.
  const id = await notify("transactional");
  await emailOf(id, (e) => e.status === "delivered");
  const answer = await call("POST", `/notifications/${id}/cancel`);
  t.match(answer, {
    status: 200,
    body: {
      status: "completed",
      channels: { email: { status: "delivered" } },
      cancel: { email: { result: "not_canceled", why: "already delivered" } },
    },
  });
  t.equal(await sentTo(id), 1, "sent once");
});
