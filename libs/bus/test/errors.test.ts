import { JetStreamApiError } from "@nats-io/jetstream";
import {
  ClosedConnectionError,
  ConnectionError,
  DrainingConnectionError,
  NoRespondersError,
  PermissionViolationError,
  RequestError,
  TimeoutError,
} from "@nats-io/transport-node";
import { judgeNatsError, PublishRejectedError, PublishTimeoutError } from "@notify/bus";
import { freshBus } from "@notify/testing";
import t from "tap";

// What libs/http's dependency classification learns from libs/bus about NATS's own errors.
t.test("the client's connection-class errors and JetStream's 503 are outages", async (t) => {
  for (const error of [
    new ConnectionError("refused"),
    new ClosedConnectionError(),
    new DrainingConnectionError(),
    new TimeoutError(),
    new NoRespondersError("$JS.API.INFO"),
    new RequestError("connection disconnected"),
    new JetStreamApiError({ code: 503, err_code: 10008, description: "unavailable" }),
    new PublishTimeoutError("no ack"),
  ]) {
    t.equal(judgeNatsError(error), "outage", error.constructor.name);
  }
});

t.test("JetStream's other answers are bugs; a RequestError with a cause and others say nothing", async (t) => {
  t.equal(
    judgeNatsError(new JetStreamApiError({ code: 404, err_code: 10059, description: "stream not found" })),
    "bug",
  );
  t.equal(
    judgeNatsError(new RequestError("x", { cause: new PermissionViolationError("denied", "publish", "x") })),
    "unknown",
  );
  t.equal(judgeNatsError(new Error("timeout")), "unknown", "never by message text");
  t.equal(judgeNatsError({ code: "ECONNREFUSED" }), "unknown");
  // Its cause carries JetStream's answer; the wrapper itself says nothing.
  t.equal(judgeNatsError(new PublishRejectedError(503, "no responders")), "unknown");
});

t.test("a stream's consumer limit reached is an outage: readers that finish free it", async (t) => {
  const bus = await freshBus(t, 1);
  const stream = `${bus.streams.dlq}_LIMITED`;
  await bus.jsm.streams.add({ name: stream, subjects: [`${stream}.>`], max_consumers: 1, storage: "memory" as never });
  t.teardown(() => bus.jsm.streams.delete(stream).catch(() => {}));
  await bus.jsm.consumers.add(stream, { name: "one", ack_policy: "none" as never });
  const refused = await bus.jsm.consumers.add(stream, { name: "two", ack_policy: "none" as never }).catch((e) => e);
  t.type(refused, JetStreamApiError, "JetStream refused the second consumer");
  t.equal(judgeNatsError(refused), "outage", `${refused.message}: 503 with Retry-After, not 500`);
});
