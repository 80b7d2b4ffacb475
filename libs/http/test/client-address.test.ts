import { captureLogger } from "@notify/testing";
import fc from "fast-check";
import type { Hono } from "hono";
import t from "tap";
import { type AppEnv, clientAddress, newApp, trustedProxies } from "../src/index.js";

// Which address the pre-auth budget counts a request against: the peer's, unless the peer is a
// trusted proxy; then the rightmost X-Forwarded-For entry that is not a trusted proxy.

const proxies = trustedProxies([
  { address: "10.0.0.0", prefix: 8, family: 4 },
  { address: "192.0.2.7", family: 4 },
  { address: "fd00::", prefix: 8, family: 6 },
]);

function appWith(trusted: typeof proxies) {
  const app = newApp(captureLogger("test").log, trusted === undefined ? {} : { trustedProxies: trusted });
  app.get("/", (c) => c.text(clientAddress(c) ?? "(none)"));
  return app;
}

const ask = async (app: Hono<AppEnv>, peer: string | undefined, forwardedFor?: string) =>
  (
    await app.request(
      "/",
      { headers: forwardedFor === undefined ? {} : { "x-forwarded-for": forwardedFor } },
      peer === undefined ? undefined : { incoming: { socket: { remoteAddress: peer } } },
    )
  ).text();

t.test("the rules, one by one", async (t) => {
  const app = appWith(proxies);
  t.equal(await ask(app, "203.0.113.5", "198.51.100.1"), "203.0.113.5", "an untrusted peer's header is ignored");
  t.equal(await ask(app, "10.1.1.1", "198.51.100.1"), "198.51.100.1", "a trusted peer forwards the client");
  t.equal(await ask(app, "::ffff:10.1.1.1", "198.51.100.1"), "198.51.100.1", "an IPv4-mapped peer is its IPv4");
  t.equal(
    await ask(app, "10.1.1.1", "6.6.6.6, 198.51.100.1"),
    "198.51.100.1",
    "entries left of it are the client's words",
  );
  t.equal(await ask(app, "10.1.1.1", "198.51.100.1, 192.0.2.7, fd00::1"), "198.51.100.1", "trusted hops are skipped");
  t.equal(await ask(app, "10.1.1.1", "10.2.2.2"), "10.2.2.2", "all trusted: the leftmost");
  t.equal(await ask(app, "10.1.1.1", "garbage, 198.51.100.1"), "198.51.100.1");
  t.equal(
    await ask(app, "10.1.1.1", "198.51.100.1, garbage"),
    "10.1.1.1",
    "a malformed hop stops the walk at the proxy",
  );
  t.equal(await ask(app, "10.1.1.1", "198.51.100.1:5678"), "198.51.100.1", "an entry's port is not its address");
  t.equal(await ask(app, "10.1.1.1", "[2001:db8::1]:443, 10.0.0.2:80"), "2001:db8::1", "nor a bracketed one's");
  t.equal(await ask(app, "10.1.1.1"), "10.1.1.1", "no header: the peer");
  t.equal(await ask(app, undefined, "198.51.100.1"), "(none)", "in-process requests have no address");
  t.equal(await ask(appWith(undefined), "10.1.1.1", "198.51.100.1"), "10.1.1.1", "no trusted proxies: the peer");
});

t.test(
  "whatever a client writes in the header, it cannot be counted as another address than the proxy saw",
  async () => {
    const app = appWith(proxies);
    const ipv4 = fc.ipV4();
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(ipv4, fc.ipV6(), fc.string({ maxLength: 20 })), { maxLength: 6 }),
        ipv4,
        async (own, seen) => {
          fc.pre(!proxies?.has(seen));
          // The client's own entries, then the address the trusted proxy saw and appended.
          const header = [...own, seen].join(", ");
          return (await ask(app, "10.9.9.9", header)) === seen;
        },
      ),
      { numRuns: 300 },
    );
  },
);
