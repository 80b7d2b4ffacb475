import fc from "fast-check";
import t from "tap";
import { isPrivateAddress, privateHostProblem, pushEndpointProblem } from "../src/index.js";

// A push subscription's endpoint is a URL a user handed over: it must be https on a public
// host, never loopback, link-local, private or otherwise internal, except in development.

const octet = fc.integer({ min: 0, max: 255 });
const ipv4 = (first: fc.Arbitrary<number>, second: fc.Arbitrary<number> = octet) =>
  fc.tuple(first, second, octet, octet).map((parts) => parts.join("."));
const hex = fc.integer({ min: 0, max: 0xffff }).map((n) => n.toString(16));
const ipv6 = (prefix: string, groups: number) =>
  fc.array(hex, { minLength: groups, maxLength: groups }).map((rest) => `${prefix}:${rest.join(":")}`);

/** Addresses in ranges that must be refused, each generated within its range. */
const privateIpv4 = fc.oneof(
  ipv4(fc.constant(10)),
  ipv4(fc.constant(127)),
  ipv4(fc.constant(0)),
  ipv4(fc.constant(169), fc.constant(254)),
  ipv4(fc.constant(172), fc.integer({ min: 16, max: 31 })),
  ipv4(fc.constant(192), fc.constant(168)),
  ipv4(fc.constant(100), fc.integer({ min: 64, max: 127 })),
  ipv4(fc.integer({ min: 224, max: 255 })),
  ipv4(fc.constant(198), fc.integer({ min: 18, max: 19 })),
);
const privateIpv6 = fc.oneof(
  fc.constant("::1"),
  fc.constant("::"),
  ipv6("fe80", 7).map((a) => a.replace(/^fe80/, `fe${["8", "9", "a", "b"][a.length % 4]}0`)),
  ipv6("fd00", 7),
  ipv6("fc12", 7),
  ipv6("ff02", 7),
  ipv6("2001:db8", 6),
  privateIpv4.map((a) => `::ffff:${a}`),
);
/** Public unicast IPv4: first octets outside every reserved block. */
const publicFirst = fc.constantFrom(
  1,
  8,
  9,
  23,
  31,
  45,
  52,
  64,
  77,
  91,
  99,
  104,
  128,
  142,
  151,
  185,
  193,
  201,
  212,
  223,
);
const publicIpv4 = ipv4(publicFirst);
const publicIpv6 = fc.oneof(ipv6("2a00", 7), ipv6("2606", 7), ipv6("2c0f", 7), ipv6("2400", 7));
// A label starting "xn--" is punycode to the URL parser, and a random one is invalid punycode: no
// URL can carry it (new URL throws), so it says nothing about which hosts are allowed.
const label = fc.stringMatching(/^[a-z][a-z0-9-]{0,20}[a-z0-9]$/).filter((l) => !l.startsWith("xn--"));
const publicName = fc
  .tuple(fc.array(label, { minLength: 1, maxLength: 3 }), fc.constantFrom("com", "net", "org", "io", "de", "co.uk"))
  .map(([labels, tld]) => [...labels, tld].join("."));
const privateName = fc.oneof(
  fc.constantFrom("localhost", "LOCALHOST", "localhost.", "metadata", "db"),
  label.map((l) => `${l}.localhost`),
  label.map((l) => `${l}.local`),
  label.map((l) => `${l}.internal`),
  label.map((l) => `${l}.home.arpa`),
  label,
);
const host = (address: string) => (address.includes(":") ? `[${address}]` : address);
const endpoint = (hostPart: string, path = "/push/abc") => `https://${hostPart}${path}`;

t.test("private, loopback, link-local and reserved addresses are refused", async () => {
  fc.assert(
    fc.property(fc.oneof(privateIpv4, privateIpv6), (address) => {
      const problem = pushEndpointProblem(endpoint(host(address)));
      return problem !== null && /public/.test(problem);
    }),
  );
});

t.test("internal names are refused: localhost, private-use suffixes, single labels", async () => {
  fc.assert(fc.property(privateName, (name) => pushEndpointProblem(endpoint(name)) !== null));
});

t.test("https on a public address or name is accepted, on any port and path", async () => {
  fc.assert(
    fc.property(
      fc.oneof(publicIpv4, publicIpv6, publicName),
      fc.option(fc.integer({ min: 1, max: 65535 }), { nil: undefined }),
      fc.webPath(),
      (name, port, path) => {
        const hostPart = port === undefined ? host(name) : `${host(name)}:${port}`;
        return pushEndpointProblem(endpoint(hostPart, path.startsWith("/") ? path : `/${path}`)) === null;
      },
    ),
  );
});

t.test("plain http is refused wherever it points", async () => {
  fc.assert(
    fc.property(fc.oneof(publicIpv4, publicName), (name) =>
      /https/.test(pushEndpointProblem(`http://${name}/x`) ?? ""),
    ),
  );
});

t.test("the development profile allows loopback and private hosts, still only https", async () => {
  const dev = { allowPrivateHosts: true };
  fc.assert(
    fc.property(
      fc.oneof(privateIpv4, privateIpv6, privateName),
      (name) => pushEndpointProblem(endpoint(host(name)), dev) === null,
    ),
  );
  t.equal(pushEndpointProblem("https://127.0.0.1:43123/push/abc", dev), null, "the push sandbox");
  t.match(pushEndpointProblem("http://127.0.0.1:43123/push/abc", dev), /https/);
});

t.test("address forms the URL parser rewrites are judged as what they mean", async (t) => {
  for (const sneaky of [
    "https://0x7f.1/x",
    "https://2130706433/x",
    "https://0177.0.0.1/x",
    "https://[::ffff:7f00:1]/x",
    "https://[::ffff:10.0.0.1]/x",
    "https://169.254.169.254./x",
    "https://LocalHost:8443/x",
  ]) {
    t.not(pushEndpointProblem(sneaky), null, sneaky);
  }
  t.ok(isPrivateAddress("not an address"), "what is not an address is not public");
  t.equal(privateHostProblem("fcm.googleapis.com"), null);
  t.equal(privateHostProblem("updates.push.services.mozilla.com"), null);
});
