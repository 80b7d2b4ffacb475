import type { WorkItem } from "@notify/core";
import { startSendgridSandbox } from "@notify/devstack";
import { createSendgridProvider } from "@notify/providers";
import { eventually } from "@notify/testing";
import t from "tap";
import { createApp } from "../src/app.js";
import { startConsumers } from "../src/consumers.js";
import { createBreaker } from "../src/providers/breaker.js";
import { channelRow, harness, statusHistory, workItem } from "./helpers.js";

// Spec rule 12 through the real pools: the breaker opens on the failure rate, work is parked
// without spending attempts, a half-open probe finds the provider well again, the breaker
// closes and the parked work is delivered. Its state shows in logs, metrics and the admin view.
const h = await harness(t);
const sandbox = await startSendgridSandbox({ port: 0, apiKey: "SG.test" });
t.teardown(() => sandbox.close());
const breakerSettings = {
  windowCalls: 20,
  minCalls: 4,
  failurePercent: 50,
  slowCallMs: 60_000,
  openMs: 1500,
  halfOpenProbes: 1,
};
const gates = h.gates(
  [createSendgridProvider({ apiKey: "SG.test", baseUrl: sandbox.url, from: "n@example.com", timeoutMs: 2000 })],
  { breaker: breakerSettings },
);
const gate = gates[0] as (typeof gates)[0];
const delivery = await startConsumers({
  ...h.deps(gate, { maxAttempts: 10, retryBaseMs: 50, retryMaxMs: 200 }),
  databases: { transactional: h.database, promotional: h.database },
  gates,
  concurrency: { transactional: 2, promotional: 2 },
});
t.teardown(() => delivery.stop());
const TOKEN = "a-very-long-admin-token-for-the-tests-0123456789";
const app = createApp({
  log: h.log.log,
  metrics: h.registry,
  breakers: [gate.breaker],
  adminToken: TOKEN,
  checks: {},
  isStopping: () => false,
});
const admin = async () =>
  (await (await app.request("/admin/breakers", { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as {
    data: Array<{ provider: string; state: string; half_open_at: string | null }>;
  };
const metric = async (name: string) => {
  const text = await (await app.request("/metrics")).text();
  return Number(new RegExp(`^${name.replace(/[{}"[\]]/g, "\\$&")} (\\S+)$`, "m").exec(text)?.[1] ?? Number.NaN);
};

const publish = (item: WorkItem) =>
  h.bus.publish(h.bus.subjects.work(item.channel, item.priority), item, `${item.notification_id}:${item.channel}`);

t.test("the breaker opens on failures, parks work without spending attempts, probes and closes", async (t) => {
  sandbox.fault({ status: 503 });
  const items = await Promise.all(Array.from({ length: 10 }, () => workItem(h.database)));
  for (const item of items) await publish(item);

  await eventually(async () => ((await admin()).data[0]?.state === "open" ? true : undefined), 10_000, "breaker open");
  t.match((await admin()).data, [{ provider: "sendgrid", state: "open", half_open_at: String }]);
  t.equal(await metric('notify_provider_breaker_state{provider="sendgrid",state="open"}'), 1);
  t.equal(await metric('notify_provider_breaker_state{provider="sendgrid",state="closed"}'), 0);
  t.ok(
    h.log.lines().some((line) => line.includes("provider breaker opened")),
    "logged",
  );
  await eventually(
    async () => {
      const rows = await Promise.all(items.map((item) => channelRow(h.database, item)));
      return rows.filter((row) => row?.status === "parked").length >= 5 ? true : undefined;
    },
    10_000,
    "work parked",
  );
  const failedCalls = sandbox.messages().length;
  t.equal(failedCalls, 0, "nothing was accepted while the provider failed");

  sandbox.reset();
  await eventually(
    async () => {
      const rows = await Promise.all(items.map((item) => channelRow(h.database, item)));
      return rows.every((row) => row?.status === "delivered") ? rows : undefined;
    },
    20_000,
    "everything delivered after recovery",
  );
  t.equal((await admin()).data[0]?.state, "closed");
  t.equal(sandbox.messages().length, 10, "each one sent once");
  t.equal(
    (await metric('notify_provider_breaker_transitions_total{provider="sendgrid",state="half_open"}')) >= 1,
    true,
  );
  t.equal((await metric('notify_provider_breaker_transitions_total{provider="sendgrid",state="closed"}')) >= 1, true);

  for (const item of items) {
    const history = await statusHistory(h.database, item);
    const failures = history.filter((e) => e.status === "retrying").length;
    const row = await channelRow(h.database, item);
    t.equal(row?.attempts, failures + 1, "attempts count provider calls only, never parking");
  }
  const parked = (await Promise.all(items.map((item) => statusHistory(h.database, item)))).flat();
  t.ok(
    parked.some((e) => e.status === "parked" && e.reason === "sendgrid circuit breaker is open"),
    "parking is logged with its reason",
  );
});

t.test("the admin view needs the token; without a configured token it does not exist", async (t) => {
  t.equal((await app.request("/admin/breakers")).status, 401);
  t.match((await app.request("/admin/breakers")).headers.get("www-authenticate"), /^Bearer realm="notify-workers"$/);
  const wrong = await app.request("/admin/breakers", { headers: { authorization: `Bearer ${TOKEN}x` } });
  t.equal(wrong.status, 401);
  t.match(wrong.headers.get("www-authenticate"), /error="invalid_token"/);
  t.equal(wrong.headers.get("content-type"), "application/problem+json");
  const basic = await app.request("/admin/breakers", { headers: { authorization: `Basic ${TOKEN}` } });
  t.equal(basic.status, 401);
  const closed = createApp({
    log: h.log.log,
    metrics: h.registry,
    breakers: [gate.breaker],
    adminToken: undefined,
    checks: {},
    isStopping: () => false,
  });
  t.equal((await closed.request("/admin/breakers", { headers: { authorization: `Bearer ${TOKEN}` } })).status, 404);
});

t.test("dispose() clears an open breaker's timer, which would keep the process alive", async (t) => {
  const timers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
  const before = timers();
  const breaker = createBreaker("probe", { ...breakerSettings, minCalls: 1, openMs: 60_000 }, () => {});
  await breaker.run(
    async () => ({ outcome: "transient", reason: "503", status: 503 }),
    () => true,
  );
  t.equal(breaker.state(), "open");
  t.equal(timers(), before + 1, "the open state holds a timer");
  breaker.dispose();
  t.equal(timers(), before, "released");
});
