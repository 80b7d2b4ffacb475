import { removeWorkerReport, type WorkerReport, writeWorkerReport } from "@notify/bus";
import { availableTokens, type LaneBuckets } from "@notify/core";
import { seedApiKey } from "@notify/db";
import fc from "fast-check";
import t from "tap";
import { summarizeProviders } from "../src/ops/providers.js";
import { ingestApp } from "./support.js";

// GET /api/v1/ops/providers reads what the worker processes report to notify_workers (written
// here as apps/workers' reporter writes it, through libs/bus writeWorkerReport), the shared
// breaker decisions (notify_breakers) and token buckets (notify_rate).
const { app, database, bus } = await ingestApp(t);
const operator = await seedApiKey(database, { clientId: "ops", name: "operator", scopes: ["operator"] });
const reader = await seedApiKey(database, { clientId: "shop", name: "reader", scopes: ["read"] });
const workersKv = await bus.kv("notify_workers");

const lanes = {
  transactional: { rate_per_second: 20, burst: 10, waiting: 0 },
  promotional: { rate_per_second: 80, burst: 40, waiting: 3 },
};
const report = (worker: string, breakers: Record<string, "open" | "closed" | "half_open">): WorkerReport => ({
  worker,
  reported_at: new Date().toISOString(),
  providers: Object.entries(breakers).map(([provider, breaker]) => ({
    provider,
    channel: provider === "plivo" ? "sms" : "email",
    breaker,
    lanes,
  })),
});
const providers = async (key = operator) => {
  const response = await app.request("/api/v1/ops/providers", { headers: { "x-api-key": key } });
  // biome-ignore lint/suspicious/noExplicitAny: answers of many shapes, checked by t.match and t.same
  return { status: response.status, body: (await response.json()) as any };
};

t.test("no worker reports: no provider", async (t) => {
  t.same(await providers(), { status: 200, body: { data: [] } });
});

t.test("a breaker one worker reported open is open; the shared decision says who and when", async (t) => {
  await writeWorkerReport(workersKv, report("host-a:1", { sendgrid: "open", plivo: "closed" }));
  await writeWorkerReport(workersKv, report("host-b:2", { sendgrid: "closed", plivo: "half_open" }));
  const decidedAt = Date.now() - 5000;
  await (await bus.kv("notify_breakers")).put(
    "sendgrid",
    JSON.stringify({ state: "open", by: "host-a:1", at: decidedAt }),
  );
  // The shared bucket spent 30 tokens' worth ahead of now (GCRA arrival times, ms).
  const now = Date.now();
  const state: LaneBuckets = { reserved: 0, shared: now + 30 * (1000 / 80) };
  await (await bus.kv("notify_rate")).put("sendgrid", JSON.stringify(state));

  const asked = Date.now();
  const { status, body } = await providers();
  const answered = Date.now();
  t.equal(status, 200);
  t.same(
    body.data.map((p: { provider: string }) => p.provider),
    ["plivo", "sendgrid"],
    "by name",
  );
  const sendgrid = body.data[1];
  t.match(sendgrid, {
    provider: "sendgrid",
    channel: "email",
    breaker: {
      state: "open",
      decided: "open",
      decided_by: "host-a:1",
      decided_at: new Date(decidedAt).toISOString(),
    },
  });
  t.same(
    sendgrid.workers.map((w: { worker: string; breaker: string }) => [w.worker, w.breaker]),
    [
      ["host-a:1", "open"],
      ["host-b:2", "closed"],
    ],
  );
  t.same(sendgrid.workers[0].lanes, lanes);
  // The bucket refills as time passes (80 a second): the answer was computed some time between
  // the request and the answer, however slow the machine.
  const rates = { reserved: { perSecond: 20, burst: 10 }, shared: { perSecond: 80, burst: 40 } };
  const least = availableTokens(state, asked, rates).promotional;
  const most = availableTokens(state, answered, rates).promotional;
  t.ok(
    sendgrid.tokens.promotional >= least - 1 &&
      sendgrid.tokens.promotional <= most + 1 &&
      sendgrid.tokens.promotional < 40,
    `tokens left in the shared bucket (${sendgrid.tokens.promotional}, between ${least} and ${most})`,
  );
  t.equal(sendgrid.tokens.transactional, sendgrid.tokens.promotional + 10, "transactional has its reserve too");
  const plivo = body.data[0];
  t.match(plivo, {
    channel: "sms",
    breaker: { state: "half_open", decided: null, decided_by: null, decided_at: null },
    tokens: { transactional: 50, promotional: 40 },
  });

  await removeWorkerReport(workersKv, "host-a:1");
  const after = (await providers()).body.data.find((p: { provider: string }) => p.provider === "sendgrid");
  t.equal(after.breaker.state, "closed", "once the worker that had it open is gone, the live ones decide");
  t.equal(after.workers.length, 1);
  await removeWorkerReport(workersKv, "host-b:2");
  t.same((await providers()).body, { data: [] }, "a provider no live worker reports is not listed");
});

t.test("the operator scope only", async (t) => {
  const answer = await providers(reader);
  t.equal(answer.status, 403);
  t.match(answer.body, { code: "insufficient_scope" });
});

t.test("summarizeProviders: the overall breaker is the worst a worker reports", async (t) => {
  const state = fc.constantFrom("open" as const, "closed" as const, "half_open" as const);
  fc.assert(
    fc.property(fc.array(state, { minLength: 1, maxLength: 6 }), (states) => {
      const reports = states.map((s, i) => report(`w${i}`, { sendgrid: s }));
      const [view] = summarizeProviders(reports, new Map(), new Map(), Date.now());
      const expected = states.includes("open") ? "open" : states.includes("half_open") ? "half_open" : "closed";
      return view?.breaker.state === expected && view.workers.length === states.length && view.tokens !== null;
    }),
  );
  t.pass();
});
