import "@notify/bus";
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import type { Socket } from "node:net";
import { dirname, join } from "node:path";
import { TE } from "@nats-io/nats-core/internal";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jsonBytes } from "@notify/bus";
import { TEST_NATS_URL } from "@notify/testing";
import fc from "fast-check";
import t, { type Test } from "tap";

// The bus's changes to the NATS client. It writes to the server once per turn of the event loop:
// what handlers resumed in separate turns of one iteration send (each its own microtask turn)
// leaves in one write, in order, none lost. A request that was answered makes no error. And text
// is encoded into Buffer's pool, byte for byte as a TextEncoder would.

/** Counts the writes the connection's socket hands to the kernel. */
function countWrites(nc: NatsConnection): () => number {
  const socket = (nc as unknown as { protocol: { transport: { socket: Socket } } }).protocol.transport.socket;
  const target = socket as unknown as Record<"_write" | "_writev", (...args: unknown[]) => void>;
  let writes = 0;
  for (const method of ["_write", "_writev"] as const) {
    const original = target[method].bind(socket);
    target[method] = (...args: unknown[]) => {
      writes++;
      original(...args);
    };
  }
  return () => writes;
}

t.test("what turns of one event-loop iteration send leaves in one write, in order", async (t) => {
  const sender = await connect({ servers: TEST_NATS_URL });
  const receiver = await connect({ servers: TEST_NATS_URL });
  t.teardown(async () => {
    await sender.close();
    await receiver.close();
  });
  const subject = `transport-test.${randomUUID()}`;
  const received: string[] = [];
  const sub = receiver.subscribe(subject, { max: 50 });
  const done = (async () => {
    for await (const message of sub) received.push(message.string());
  })();
  await receiver.flush();

  const writes = countWrites(sender);
  // Fifty callbacks of one check phase: Node runs the microtasks (and so the client's flush)
  // after each of them.
  await new Promise<void>((resolve) => {
    for (let i = 0; i < 50; i++) {
      setImmediate(() => {
        sender.publish(subject, `m${i}`);
        if (i === 49) resolve();
      });
    }
  });
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(writes(), 1, "fifty publishes, one write");
  await sender.flush();
  await done;
  t.same(
    received,
    Array.from({ length: 50 }, (_, i) => `m${i}`),
    "every message arrives, in order",
  );
});

t.test("requests written through the held writes are answered", async (t) => {
  const nc = await connect({ servers: TEST_NATS_URL });
  t.teardown(() => nc.close());
  const subject = `transport-test.${randomUUID()}`;
  const sub = nc.subscribe(subject);
  void (async () => {
    for await (const message of sub) message.respond(`echo ${message.string()}`);
  })();
  const answers = await Promise.all(
    Array.from({ length: 20 }, (_, i) => nc.request(subject, `q${i}`, { timeout: 2000 }).then((m) => m.string())),
  );
  t.same(
    answers,
    Array.from({ length: 20 }, (_, i) => `echo q${i}`),
  );
});

t.test("what was written in the turn of a close is sent before the socket goes", async (t) => {
  const receiver = await connect({ servers: TEST_NATS_URL });
  t.teardown(() => receiver.close());
  const subject = `transport-test.${randomUUID()}`;
  const sub = receiver.subscribe(subject, { max: 1 });
  await receiver.flush();
  const sender = await connect({ servers: TEST_NATS_URL });
  // As the bus does: a status listener, which close() waits for before it destroys the socket.
  void (async () => {
    for await (const _ of sender.status()) {
      // only listened to
    }
  })();
  sender.publish(subject, "last words");
  await sender.close();
  const got = await Promise.race([
    (async () => {
      for await (const message of sub) return message.string();
      return "(none)";
    })(),
    new Promise<string>((resolve) => setTimeout(() => resolve("(timed out)"), 2000)),
  ]);
  t.equal(got, "last words");
});

// The client's RequestError, counted where the client makes it (its own module).
const requireHere = createRequire(import.meta.url);
const errorsModule = requireHere(join(dirname(requireHere.resolve("@nats-io/nats-core/internal")), "errors.js")) as {
  RequestError: new (message: string, options?: ErrorOptions) => Error;
};

function countRequestErrors(t: Test): () => number {
  const Original = errorsModule.RequestError;
  let made = 0;
  errorsModule.RequestError = class Counted extends Original {
    constructor(message: string, options?: ErrorOptions) {
      super(message, options);
      made++;
    }
  };
  t.teardown(() => {
    errorsModule.RequestError = Original;
  });
  return () => made;
}

t.test("an answered request makes no error; one cut off by a close is still refused", async (t) => {
  // As the bus connects: no error made up front for every request in case it fails.
  const nc = await connect({ servers: TEST_NATS_URL, noAsyncTraces: true });
  t.teardown(() => (nc.isClosed() ? undefined : nc.close()));
  const subject = `transport-test.${randomUUID()}`;
  const silent = `transport-test.${randomUUID()}`;
  const echo = nc.subscribe(subject);
  void (async () => {
    for await (const message of echo) message.respond("ok");
  })();
  nc.subscribe(silent);
  await nc.flush();

  const made = countRequestErrors(t);
  await Promise.all(Array.from({ length: 50 }, () => nc.request(subject, "q", { timeout: 2000 })));
  t.equal(made(), 0, "fifty answers, no error made (one each before)");

  const pending = nc.request(silent, "q", { timeout: 10_000 }).catch((error: unknown) => error);
  await nc.flush();
  await nc.close();
  const refused = await pending;
  t.type(refused, Error, "the unanswered request is refused when the connection closes");
  t.match(String((refused as Error).message), /closed|cancel/i);
});

t.test("the client encodes text into Buffer's pool, byte for byte as a TextEncoder does", async (t) => {
  const reference = new TextEncoder();
  // Any UTF-16 string, lone surrogates included (each becomes U+FFFD's three bytes either way).
  fc.assert(
    fc.property(fc.string({ unit: "binary", maxLength: 300 }), (text) => {
      const ours = TE.encode(text);
      return Buffer.isBuffer(ours) && Buffer.from(reference.encode(text)).equals(ours as Buffer);
    }),
    { numRuns: 2000 },
  );
  t.equal(TE.encode().length, 0, "nothing given, nothing encoded (as TextEncoder)");
  const value = { id: "n-1", text: "héllo \ud83d\udc4b \u2028", n: 3 };
  t.same(Buffer.from(jsonBytes(value)).toString("utf8"), JSON.stringify(value), "jsonBytes is the JSON's UTF-8");

  // Through a server: a string payload and a header with non-ASCII text arrive as they were sent.
  const nc = await connect({ servers: TEST_NATS_URL });
  t.teardown(() => nc.close());
  const subject = `transport-test.${randomUUID()}`;
  const sub = nc.subscribe(subject, { max: 1 });
  await nc.flush();
  const { headers } = await import("@nats-io/transport-node");
  const h = headers();
  h.set("X-Note", "grüße");
  nc.publish(subject, "payload ✓ 👋", { headers: h });
  for await (const message of sub) {
    t.equal(message.string(), "payload ✓ 👋");
    t.equal(message.headers?.get("X-Note"), "grüße");
  }
});
