import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { type Bus, requestCancelPatched } from "@notify/bus";
import { freshBus } from "@notify/testing";
import t from "tap";

// Every answered NATS request used to make a RequestError("cancelled"), with its stack trace,
// to reject a promise already settled: a measurable share of the processor's and the workers'
// CPU. The count below is of those Errors, through the module the client itself reads them from.
const bus: Bus = await freshBus(t, 1);
// By its file, next to the entry point: the package exports no such subpath.
const require = createRequire(import.meta.url);
const errors = require(join(dirname(require.resolve("@nats-io/nats-core/internal")), "errors.js")) as {
  RequestError: new (...args: unknown[]) => Error;
};
const Original = errors.RequestError;
let made = 0;
errors.RequestError = class Counted extends Original {
  constructor(...args: unknown[]) {
    super(...args);
    made++;
  }
};
t.teardown(() => {
  errors.RequestError = Original;
});

t.test("the library has the shape the patch expects", async (t) => {
  t.equal(requestCancelPatched, true);
});

t.test("answered requests make no Error", async (t) => {
  const subject = `${bus.naming.namespace}.echo`;
  const sub = bus.nc.subscribe(subject, {
    callback: (_, msg) => {
      msg.respond(msg.data);
    },
  });
  t.teardown(() => sub.unsubscribe());
  made = 0;
  for (let i = 0; i < 20; i++) {
    const answer = await bus.nc.request(subject, new TextEncoder().encode(`ping ${i}`), { timeout: 2000 });
    t.equal(new TextDecoder().decode(answer.data), `ping ${i}`);
  }
  t.equal(made, 0, "twenty answers, no RequestError");
});

t.test("a request that is not answered still fails, with its reason", async (t) => {
  const failure = await bus.nc
    .request(`${bus.naming.namespace}.nobody-${Date.now()}`, new Uint8Array(), { timeout: 2000 })
    .then(
      () => null,
      (error: unknown) => error as Error & { isNoResponders?: () => boolean },
    );
  t.ok(failure?.isNoResponders?.(), "rejected: no responders");
  const silent = `${bus.naming.namespace}.silent`;
  const sub = bus.nc.subscribe(silent, { callback: () => {} });
  t.teardown(() => sub.unsubscribe());
  await t.rejects(bus.nc.request(silent, new Uint8Array(), { timeout: 200 }), { name: "TimeoutError" }, "a timeout");
});

t.test("a JetStream publish still acks, and a KV get of a missing key is still null", async (t) => {
  made = 0;
  const ack = await bus.publish(bus.subjects.work("sms", "promotional"), { n: 1 }, `cancel-${Date.now()}`);
  t.ok(ack.seq > 0);
  t.equal(made, 0, "the publish ack made no RequestError");
});
