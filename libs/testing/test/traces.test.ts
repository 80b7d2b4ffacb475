import { randomUUID } from "node:crypto";
import postgres from "postgres";
import t from "tap";
import { eventually, OTLP_KIND, type ReceivedSpan, startOtlpReceiver, startTestStack } from "../src/index.js";

// One trace across the whole service, over the real processes: an email notification posted
// with an upstream caller's traceparent is traced through ingest, the processor, the workers and
// the receipts (the SendGrid sandbox's signed delivered receipt), each span the child of another
// in the trace, rooted at the caller's span; the stored trace id is what the API answers, and the
// apps' log lines about the notification carry it.
const CALLER_TRACE = randomUUID().replaceAll("-", "");
const CALLER_SPAN = CALLER_TRACE.slice(0, 16);
const CALLER = `00-${CALLER_TRACE}-${CALLER_SPAN}-01`;

const receiver = await startOtlpReceiver(t);
const lines: string[] = [];
const { stack, auth } = await startTestStack(t, {
  logLevel: "debug",
  env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: "100" },
  onLine: (app, line) => lines.push(`${app} ${line}`),
});

t.test("one trace id covers ingest, processor, workers and receipts, as one tree", async (t) => {
  const response = await fetch(`${stack.baseUrl}/api/v1/notifications`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json", "idempotency-key": randomUUID(), traceparent: CALLER },
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
  const { notification_id: id } = (await response.json()) as { notification_id: string };

  const view = await eventually(
    async () => {
      const r = await fetch(`${stack.baseUrl}/api/v1/notifications/${id}`, { headers: auth });
      const v = (await r.json()) as { trace_id?: string | null; channels: Record<string, { status: string }> };
      return v.channels.email?.status === "delivered" ? v : undefined;
    },
    30_000,
    "the email delivered",
  );

  // The sandbox's delivered receipt, applied by receipts in the notification's trace.
  const receipt = await receiver.waitFor(
    (spans) =>
      spans.find(
        (s) =>
          s.name === "receipt apply" &&
          s.attributes["notify.notification_id"] === id &&
          s.attributes["notify.status"] === "delivered",
      ),
    30_000,
    "the delivered receipt's span",
  );
  const inTrace = (spans: ReceivedSpan[]) => spans.filter((s) => s.traceId === CALLER_TRACE);
  // The batches of every app are exported within ~100 ms; wait for the worker's provider call too.
  const spans = await receiver.waitFor(
    (all) => {
      const mine = inTrace(all);
      return mine.some((s) => s.kind === OTLP_KIND.client) && mine.some((s) => s.name === "notification route")
        ? mine
        : undefined;
    },
    20_000,
    "the trace's spans",
  );
  t.equal(receipt.traceId, CALLER_TRACE, "the receipt's span is in the caller's trace");

  t.same(
    [...new Set(spans.map((s) => s.service))].sort(),
    ["notify-ingest", "notify-processor", "notify-receipts", "notify-workers"],
    "spans from all four services",
  );
  const ids = new Set(spans.map((s) => s.spanId));
  const roots = spans.filter((s) => s.parentSpanId === CALLER_SPAN);
  t.equal(roots.length, 1, "one span is the caller's child");
  t.equal(roots[0]?.name, "POST /api/v1/notifications");
  t.equal(roots[0]?.service, "notify-ingest");
  t.equal(roots[0]?.kind, OTLP_KIND.server);
  for (const span of spans) {
    if (span.parentSpanId === CALLER_SPAN) continue;
    t.ok(
      span.parentSpanId !== null && ids.has(span.parentSpanId),
      `${span.service} ${span.name}: its parent is in the trace`,
    );
  }
  const parentOf = (s: ReceivedSpan | undefined) => spans.find((p) => p.spanId === s?.parentSpanId);
  const lane = spans.find((s) => s.service === "notify-processor" && s.kind === OTLP_KIND.consumer);
  t.match(lane?.name, /notify\.lane\.transactional\.\d+ process$/);
  t.equal(parentOf(lane)?.spanId, roots[0]?.spanId, "the lane message's consumer span is the request's child");
  t.match(lane?.attributes, { "messaging.system": "nats", "messaging.nats.delivery_count": 1 });
  const route = spans.find((s) => s.name === "notification route");
  t.equal(parentOf(route)?.spanId, lane?.spanId, "routing runs inside the lane consumer span");
  t.equal(route?.attributes["notify.notification_id"], id);
  const work = spans.find((s) => s.service === "notify-workers" && s.kind === OTLP_KIND.consumer);
  t.match(work?.name, /notify\.work\.email\.transactional process$/);
  t.equal(parentOf(work)?.spanId, route?.spanId, "the work item's consumer span is the routing span's child");
  const send = spans.find((s) => s.kind === OTLP_KIND.client);
  t.equal(send?.name, "sendgrid send");
  t.equal(parentOf(send)?.spanId, work?.spanId, "the provider call runs inside the work item's span");
  t.match(send?.attributes, {
    "notify.provider": "sendgrid",
    "notify.channel": "email",
    "notify.attempt": 1,
    "notify.outcome": "accepted",
  });
  t.equal(parentOf(receipt)?.spanId, roots[0]?.spanId, "the receipt's span is the stored request span's child");
  t.match(receipt.attributes, { "notify.provider": "sendgrid", "notify.channel": "email" });

  // Stored, and answered by the API.
  const sql = postgres(stack.databaseUrl, { max: 1 });
  t.teardown(() => sql.end());
  const [row] = await sql<{ trace_parent: string | null }[]>`select trace_parent from notifications where id = ${id}`;
  t.equal(row?.trace_parent, `00-${CALLER_TRACE}-${roots[0]?.spanId}-01`, "the request span's traceparent is stored");
  t.equal(view.trace_id, CALLER_TRACE, "GET /notifications/{id} answers the trace id");

  // The log lines about the notification carry the trace id, in every app.
  const about = lines
    .filter((l) => l.includes(id))
    .map((l) => {
      const space = l.indexOf(" ");
      return { app: l.slice(0, space), line: JSON.parse(l.slice(space + 1)) as Record<string, unknown> };
    })
    .filter((l) => l.line.notification_id === id);
  const apps = new Set(about.map((l) => l.app));
  for (const app of ["processor", "workers", "receipts"]) t.ok(apps.has(app), `${app} logged about it`);
  for (const { app, line } of about) {
    if (line.trace_id === undefined) continue;
    t.equal(line.trace_id, CALLER_TRACE, `${app}: "${line.msg}" carries the trace id`);
  }
  const traced = about.filter((l) => l.line.trace_id === CALLER_TRACE);
  t.same(
    [...new Set(traced.map((l) => l.app))].sort(),
    ["processor", "receipts", "workers"],
    "each app's lines handling it carry the trace id",
  );
  const access = lines
    .filter((l) => l.startsWith("ingest "))
    .map((l) => JSON.parse(l.slice(7)) as Record<string, unknown>)
    .find((l) => l.msg === "request" && l.route === "/api/v1/notifications" && l.method === "POST");
  t.equal(access?.trace_id, CALLER_TRACE, "ingest's access log line for the POST carries it");
});
