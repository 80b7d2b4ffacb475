import { connect } from "node:net";
import { captureLogger } from "@notify/testing";
import t from "tap";
import { addressBucket, createAttemptThrottle, listen, newApp } from "../src/index.js";

// Slow clients (slowloris): a client that never finishes its request head or body is cut off
// by the server's timeouts instead of holding a socket for as long as it likes.

const app = newApp(captureLogger("http").log);
app.get("/", (c) => c.text("ok"));
app.post("/", async (c) => c.text(await c.req.text()));

/** Sends `chunks` one by one, `gapMs` apart, and says when and how the server ended the connection. */
function trickle(port: number, chunks: string[], gapMs: number) {
  return new Promise<{ ms: number; answer: string }>((resolve) => {
    const started = performance.now();
    const socket = connect(port, "127.0.0.1");
    let answer = "";
    let timer: NodeJS.Timeout | undefined;
    socket.on("data", (data) => {
      answer += data.toString();
    });
    socket.on("close", () => {
      clearTimeout(timer);
      resolve({ ms: performance.now() - started, answer });
    });
    socket.on("error", () => {});
    const next = (i: number) => {
      if (socket.destroyed) return;
      if (i < chunks.length) socket.write(chunks[i] as string);
      timer = setTimeout(() => next(i + 1), gapMs);
    };
    next(0);
  });
}

t.test("a client that never finishes its headers is cut at the headers timeout", async (t) => {
  const server = await listen(app, 0, "127.0.0.1", { headersTimeoutMs: 1000, requestTimeoutMs: 5000 });
  t.teardown(() => server.close());
  // One header line every 300 ms, forever: each byte resets no timer of its own.
  const chunks = ["GET / HTTP/1.1\r\nHost: x\r\n", ...Array.from({ length: 100 }, (_, i) => `X-Slow-${i}: 1\r\n`)];
  const { ms, answer } = await trickle(server.port, chunks, 300);
  t.ok(ms < 3500, `closed after ${Math.round(ms)} ms`);
  t.match(answer, /^HTTP\/1\.1 408/, "answered 408 Request Timeout");
});

t.test("a client that trickles its body is cut at the request timeout", async (t) => {
  const server = await listen(app, 0, "127.0.0.1", { headersTimeoutMs: 1000, requestTimeoutMs: 1500 });
  t.teardown(() => server.close());
  const head = "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n";
  const { ms, answer } = await trickle(server.port, [head, ...Array.from({ length: 100 }, () => "x")], 200);
  t.ok(ms < 4000, `closed after ${Math.round(ms)} ms`);
  t.notMatch(answer, /^HTTP\/1\.1 200/, "never answered as if complete");
});

t.test("an idle keep-alive connection is closed after the keep-alive timeout", async (t) => {
  const server = await listen(app, 0, "127.0.0.1", { keepAliveTimeoutMs: 1000 });
  t.teardown(() => server.close());
  const { ms, answer } = await trickle(server.port, ["GET / HTTP/1.1\r\nHost: x\r\n\r\n"], 10_000);
  t.match(answer, /^HTTP\/1\.1 200/);
  t.ok(ms < 3000, `closed after ${Math.round(ms)} ms`);
});

t.test("the defaults bound a slow client too", async (t) => {
  const server = await listen(app, 0, "127.0.0.1");
  t.teardown(() => server.close());
  const node = server.server as unknown as { headersTimeout: number; requestTimeout: number; keepAliveTimeout: number };
  t.equal(node.headersTimeout, 10_000);
  t.equal(node.requestTimeout, 30_000);
  t.equal(node.keepAliveTimeout, 5_000);
});

t.test("the attempt throttle: a token bucket per address, IPv6 by /64", async (t) => {
  let now = 0;
  const throttle = createAttemptThrottle({ perSecond: 2, burst: 3, now: () => now });
  const a = throttle.budget("192.0.2.1");
  for (let i = 0; i < 3; i++) {
    a.check();
    a.charge();
  }
  t.throws(() => a.check(), { code: "rate_limited", context: { retryAfterSeconds: 1 } });
  t.doesNotThrow(() => throttle.budget("192.0.2.2").check(), "another address is not affected");
  t.throws(() => throttle.budget("::ffff:192.0.2.1").check(), "an IPv4-mapped address is its IPv4");
  now = 500;
  t.doesNotThrow(() => a.check(), "one attempt back after 1/perSecond");
  a.refund();
  a.refund();
  a.refund();
  a.charge();
  a.charge();
  a.charge();
  t.throws(() => a.check(), "never more than the burst");
  t.doesNotThrow(() => throttle.budget(undefined).check(), "no socket (in-process request): not throttled");
  t.equal(addressBucket("2001:db8:0:1::1"), "2001:db8:0:1::/64");
  t.equal(addressBucket("2001:0db8:0000:0001:abcd::"), "2001:db8:0:1::/64");
  t.equal(addressBucket("::1"), "0:0:0:0::/64");
  t.equal(addressBucket("203.0.113.4"), "203.0.113.4");
});
