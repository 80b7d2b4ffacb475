import { type Bus, type JsMsg, runConsumer } from "@notify/bus";
import { activeTraceparent, SpanKind, startTelemetry, withSpan } from "@notify/telemetry";
import { eventually, freshBus, OTLP_KIND, startOtlpReceiver } from "@notify/testing";
import t from "tap";

// The trace context in NATS message headers, through the real server: with tracing off a
// publish carries no traceparent; with it on, the publisher's span travels in `traceparent` and
// the consumer runner handles the message inside a CONSUMER span that is its child.
const bus: Bus = await freshBus(t, 1);
const stream = bus.streams.lane("transactional");
const durable = "processor-transactional-p0";
const subject = bus.subjects.lane("transactional", 0);

interface Seen {
  id: string;
  traceparent: string | undefined;
  headers: string[];
  active: string | undefined;
}

/** Handles messages until stopped, noting each one's headers and the span active in the handler. */
async function consume(t: { teardown(fn: () => unknown): void }, seen: Seen[]) {
  const runner = await runConsumer({
    bus,
    stream,
    durable,
    concurrency: 2,
    decode: (msg: JsMsg) => msg.json<{ id: string }>(),
    handle: async (value, msg) => {
      seen.push({
        id: value.id,
        traceparent: msg.headers?.get("traceparent") || undefined,
        headers: [...(msg.headers?.keys() ?? [])],
        active: activeTraceparent(),
      });
      return { ack: true };
    },
    onError: () => {},
  });
  t.teardown(() => runner.stop());
  return runner;
}

t.test("tracing off: a publish adds no trace header, a handler runs in no span", async (t) => {
  const seen: Seen[] = [];
  const runner = await consume(t, seen);
  await withSpan("ignored", {}, () => bus.publish(subject, { id: "off" }, "off"));
  await eventually(async () => (seen.length > 0 ? true : undefined), 10_000, "the message");
  t.same(seen[0]?.headers, ["Nats-Msg-Id"], "only the msg id header");
  t.equal(seen[0]?.traceparent, undefined);
  t.equal(seen[0]?.active, undefined);
  await runner.stop();
});

t.test("tracing on: traceparent travels in the headers and parents the CONSUMER span", async (t) => {
  const receiver = await startOtlpReceiver(t);
  const telemetry = await startTelemetry({
    service: "bus-test",
    settings: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url },
  });
  t.teardown(() => telemetry.shutdown());
  const seen: Seen[] = [];
  await consume(t, seen);

  let published = "";
  await withSpan("publisher", { kind: SpanKind.PRODUCER }, async () => {
    published = activeTraceparent() ?? "";
    await bus.publish(subject, { id: "on" }, "on");
  });
  const got = await eventually(async () => seen.find((s) => s.id === "on"), 10_000, "the traced message");
  t.equal(got.traceparent, published, "the publisher's traceparent is in the NATS headers");
  const [, traceId, parentId] = published.split("-");
  t.match(got.active, new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`), "the handler runs in the same trace");
  t.not(got.active?.split("-")[2], parentId, "inside a span of its own");

  await telemetry.shutdown();
  const consumer = await receiver.waitFor((spans) => spans.find((s) => s.name === `${subject} process`));
  const producer = receiver.spans.find((s) => s.name === "publisher");
  t.equal(consumer.kind, OTLP_KIND.consumer);
  t.equal(consumer.traceId, traceId);
  t.equal(consumer.parentSpanId, producer?.spanId, "the consumer span is the publisher's child");
  t.equal(consumer.spanId, got.active?.split("-")[2]);
  t.equal(consumer.service, "notify-bus-test");
  t.match(consumer.attributes, {
    "messaging.system": "nats",
    "messaging.destination.name": subject,
    "messaging.consumer.group.name": durable,
    "messaging.nats.delivery_count": 1,
    "notify.disposition": "ack",
  });
});
