import { randomUUID } from "node:crypto";
import t from "tap";
import { eventually, startTestStack } from "../src/index.js";

// Deadlines, channel fallback and email failover over the real processes (the four apps, their
// sandboxes, PostgreSQL and NATS): each outcome read back through the API and checked against
// what every provider sandbox itself received.
const { stack, auth } = await startTestStack(t, { env: { RETRY_BASE_MS: "300", RETRY_MAX_MS: "1000" } });
const { sendgrid, plivo, smtp } = stack.sandboxes;

const post = async (body: Record<string, unknown>) => {
  const response = await fetch(`${stack.baseUrl}/api/v1/notifications`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json", "idempotency-key": randomUUID() },
    body: JSON.stringify({
      user_id: "user-123",
      category: "account",
      template_id: "welcome",
      data: { name: "Ada" },
      priority: "transactional",
      ...body,
    }),
  });
  const answer = (await response.json()) as { notification_id: string };
  if (response.status !== 202) throw new Error(`POST answered ${response.status}: ${JSON.stringify(answer)}`);
  return answer.notification_id;
};
interface View {
  status: string;
  channels: Record<string, { status: string; provider: string | null; reason: string | null }>;
  timeline: Array<Record<string, unknown>>;
}
const view = async (id: string) =>
  (await (await fetch(`${stack.baseUrl}/api/v1/notifications/${id}`, { headers: auth })).json()) as View;
const settledView = (id: string, done: (v: View) => boolean, timeoutMs = 60_000) =>
  eventually(
    async () => {
      const v = await view(id);
      return done(v) ? v : undefined;
    },
    timeoutMs,
    `notification ${id}`,
  );
const FINAL = new Set(["delivered", "failed", "expired", "suppressed", "bounced", "unsettled"]);
const listing = async (url: string) =>
  ((await (await fetch(`${url}/sandbox/messages`)).json()) as { data: unknown[] }).data;
const emailsAt = async (id: string) => ({
  sendgrid: (await listing(sendgrid)).filter(
    (m) => (m as { custom_args: Record<string, string> }).custom_args.notification_id === id,
  ).length,
  smtp: (await listing(smtp)).filter((m) => (m as { notification_id: string | null }).notification_id === id).length,
});
const smsAt = async (id: string) =>
  (await listing(plivo)).filter((m) => {
    const url = (m as { url: string | null }).url;
    return url !== null && new URL(url).searchParams.get("notification_id") === id;
  }).length;
const fault = (url: string, body: unknown) =>
  fetch(`${url}/sandbox/faults`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
const clearFaults = (url: string) => fetch(`${url}/sandbox/faults`, { method: "DELETE" });

t.test("SendGrid's sandbox failing: the SMTP sandbox carries the email, once", async (t) => {
  await fault(sendgrid, { status: 503, for_ms: 60_000 });
  t.teardown(() => clearFaults(sendgrid));
  const id = await post({ channels: ["email"] });
  const v = await settledView(id, (v) => FINAL.has(v.channels.email?.status ?? ""));
  t.match(v.channels.email, { status: "delivered", provider: "smtp" }, "the status names the provider that sent");
  t.same(await emailsAt(id), { sendgrid: 0, smtp: 1 }, "received once, by SMTP");
  t.match(
    v.timeline.filter((e) => e.event === "attempt" || e.event === "provider_switch").map((e) => e.provider ?? e.event),
    ["sendgrid", "sendgrid", "provider_switch", "smtp"],
    "the timeline shows the attempts and the switch",
  );
});

t.test("a deadline that passes while the providers are slow and failing: expired, nothing sent", async (t) => {
  await fault(sendgrid, { status: 503, delay_ms: 1000, for_ms: 30_000 });
  await fault(smtp, { code: 451, delay_ms: 1000, for_ms: 30_000 });
  t.teardown(() => Promise.all([clearFaults(sendgrid), clearFaults(smtp)]));
  const id = await post({ channels: ["email"], deliver_by: new Date(Date.now() + 4000).toISOString() });
  const v = await settledView(id, (v) => FINAL.has(v.channels.email?.status ?? ""));
  t.match(v.channels.email, { status: "expired", reason: /^deadline_/ });
  t.equal(v.status, "failed", "an expired channel is a failure for the caller");
  t.same(await emailsAt(id), { sendgrid: 0, smtp: 0 }, "no provider has it");
});

t.test("a fallback taken after the processor is killed in the middle of the wait: taken once", async (t) => {
  // Push has no receipts: the SMS goes once the 3 s wait for one is over.
  const id = await post({
    channels: ["push"],
    fallback: [{ channel: "sms", when: ["failed", "unconfirmed"], confirm_within_seconds: 3 }],
  });
  await settledView(id, (v) => v.channels.push?.status === "delivered", 30_000);
  await stack.restartApp("processor", "SIGKILL");
  const v = await settledView(id, (v) => FINAL.has(v.channels.sms?.status ?? ""), 90_000);
  t.match(v.channels.sms, { status: "delivered" });
  t.match(
    v.timeline.filter((e) => e.event === "fallback"),
    [{ channel: "sms", from: "push", because: "unconfirmed" }],
  );
  // A second processor round, a redelivery or the reconciler must not send it again.
  await new Promise((resolve) => setTimeout(resolve, 3000));
  t.equal(await smsAt(id), 1, "the SMS sandbox received it once");
});
