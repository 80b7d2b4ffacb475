import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { APPS } from "@notify/devstack";
import { eventually, startTestStack } from "@notify/testing";
import t from "tap";

// GET /metrics on every app of the real stack, and the workers' delivery series after one
// notification went the whole way.
const { stack, ports } = await startTestStack(t);
// Ingest and receipts serve metrics on their operator's port only; the others on their one port.
const operatorPort = (app: (typeof APPS)[number]) =>
  app === "ingest" ? stack.ports.ingestAdmin : app === "receipts" ? stack.ports.receiptsAdmin : ports[app];
const metrics = async (app: (typeof APPS)[number]) => {
  const response = await fetch(`http://127.0.0.1:${operatorPort(app)}/metrics`);
  return { response, text: await response.text() };
};

/** How often a process's main thread was woken up so far (it slept and was woken: each is a wake-up). */
const wakeups = (pid: number) =>
  Number(/^voluntary_ctxt_switches:\s+(\d+)$/m.exec(readFileSync(`/proc/${pid}/task/${pid}/status`, "utf8"))?.[1]);

t.test("an idle app is not woken a hundred times a second", async (t) => {
  // Each wake-up costs CPU: prom-client's default event-loop lag sampling (every 10 ms) alone
  // would wake every app 100 times a second. Idle, an app wakes only for its leases, heartbeats
  // and polls, well under the bound.
  const SECONDS = 3;
  const pids = APPS.map((app) => [app, stack.apps.get(app)?.child.pid] as const);
  const before = pids.map(([, pid]) => wakeups(pid as number));
  await new Promise((resolve) => setTimeout(resolve, SECONDS * 1000));
  pids.forEach(([app, pid], i) => {
    const perSecond = (wakeups(pid as number) - (before[i] as number)) / SECONDS;
    t.ok(perSecond < 60, `${app}: ${perSecond.toFixed(0)} wake-ups a second`);
  });
});

t.test("every app serves Prometheus metrics", async (t) => {
  for (const app of APPS) {
    const { response, text } = await metrics(app);
    t.equal(response.status, 200, app);
    t.match(response.headers.get("content-type"), /^text\/plain; version=0\.0\.4/);
    t.match(text, `notify_app_info{app="${app}"} 1`);
    t.match(text, /^process_resident_memory_bytes \d+/m);
  }
  for (const app of ["ingest", "receipts"] as const) {
    const publicPort = await fetch(`http://127.0.0.1:${ports[app]}/metrics`);
    t.equal(publicPort.status, 404, `${app}: no metrics on the public port`);
  }
});

t.test("the workers count sends, queue depth and breaker state per provider", async (t) => {
  const response = await fetch(`${stack.baseUrl}/api/v1/notifications`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${stack.apiKey}`,
      "content-type": "application/json",
      "idempotency-key": randomUUID(),
    },
    body: JSON.stringify({
      user_id: "user-123",
      category: "account",
      template_id: "welcome",
      data: { name: "Ada" },
      priority: "transactional",
      channels: ["email"],
    }),
  });
  t.equal(response.status, 202);
  const text = await eventually(
    async () => {
      const { text } = await metrics("workers");
      // The send is counted when the provider answers, the outcome once its status is written.
      return /notify_provider_sends_total\{provider="sendgrid",channel="email",result="accepted"\} 1$/m.test(text) &&
        text.includes('notify_delivery_outcomes_total{channel="email",lane="transactional",status="delivered"} 1')
        ? text
        : undefined;
    },
    20_000,
    "one accepted send and its delivered outcome in the metrics",
  );
  t.match(text, /^notify_delivery_queue_depth\{channel="email",lane="transactional"\} 0$/m);
  t.match(text, /^notify_delivery_ack_pending\{channel="email",lane="promotional"\} 0$/m);
  t.match(text, 'notify_provider_breaker_state{provider="sendgrid",state="closed"} 1');
  t.match(text, /^notify_provider_send_duration_seconds_count\{provider="sendgrid"\} 1$/m);
});
