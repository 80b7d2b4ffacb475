import { BlockList, isIP } from "node:net";

/**
 * Addresses that are not on the public Internet: "this" network, RFC 1918 and shared (CGNAT)
 * space, loopback, link-local (cloud metadata at 169.254.169.254), the IETF, documentation and
 * benchmark blocks, multicast and reserved space; IPv6 unspecified, loopback, IPv4-mapped and
 * -translated and IPv4-compatible, discard, the IETF block (Teredo included), documentation, 6to4, unique local,
 * link-local, site-local and multicast. An IPv4-mapped IPv6 address is judged as its IPv4.
 */
const blocked = new BlockList();
for (const [network, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  blocked.addSubnet(network, prefix, "ipv4");
}
for (const [network, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["64:ff9b::", 96],
  ["64:ff9b:1::", 48],
  ["100::", 64],
  ["2001::", 23],
  ["2001:db8::", 32],
  ["2002::", 16],
  ["fc00::", 7],
  ["fe80::", 10],
  ["fec0::", 10],
  ["ff00::", 8],
] as const) {
  blocked.addSubnet(network, prefix, "ipv6");
}

/** Whether an IP address is loopback, private, link-local, multicast or otherwise not public; anything that is not an IP address counts as not public. */
export function isPrivateAddress(address: string): boolean {
  const bare = address.replace(/^\[|\]$/g, "");
  const family = isIP(bare);
  if (family === 0) return true;
  if (family === 6) {
    // ::ffff:a.b.c.d (or its hex form, as URL parsing writes it) is the IPv4 address a.b.c.d.
    const dotted = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(bare);
    if (dotted?.[1]) return blocked.check(dotted[1], "ipv4");
    const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(bare);
    if (mapped?.[1] && mapped[2]) {
      const high = Number.parseInt(mapped[1], 16);
      const low = Number.parseInt(mapped[2], 16);
      return blocked.check(`${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`, "ipv4");
    }
    // ::a.b.c.d, IPv4-compatible (deprecated); the ::/96 and ::ffff:0:0/96 rules cannot be added
    // to the list, as BlockList matches every IPv4 address against them.
    if (/^::([0-9a-f]{1,4}:)?[0-9a-f]{1,4}$/i.test(bare) || /^::\d+\.\d+\.\d+\.\d+$/.test(bare)) return true;
    return blocked.check(bare, "ipv6");
  }
  return blocked.check(bare, "ipv4");
}

/** Names that only ever mean this machine or a private network. */
const PRIVATE_SUFFIXES = [
  ".localhost",
  ".local",
  ".localdomain",
  ".internal",
  ".intranet",
  ".lan",
  ".home.arpa",
  ".corp",
  ".home",
];

/**
 * Why a URL host (as `new URL().hostname` gives it) is not a public host, or null when it may
 * be: an IP literal in a non-public range, `localhost` or a name under a private-use suffix,
 * or a single-label name (resolved by a local search domain, never a public push service).
 * A public name can still resolve to a private address; whoever connects checks that at
 * connect time (libs/providers webpush/ssrf.ts).
 */
export function privateHostProblem(hostname: string): string | null {
  const host = hostname.toLowerCase().replace(/\.$/, "");
  const bare = host.replace(/^\[|\]$/g, "");
  if (isIP(bare) !== 0) return isPrivateAddress(bare) ? `${bare} is not a public address` : null;
  if (host === "localhost" || PRIVATE_SUFFIXES.some((suffix) => host.endsWith(suffix))) {
    return `${host} is not a public host`;
  }
  if (!host.includes(".")) return `${host} is not a public host name (no domain)`;
  return null;
}
