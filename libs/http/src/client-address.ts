import { BlockList, isIP } from "node:net";
import type { Context } from "hono";

/**
 * The proxies in front of an app (load balancers, ingress) whose X-Forwarded-For is believed:
 * addresses and CIDR ranges, IPv4 or IPv6. Anyone can send X-Forwarded-For, so it says who the
 * client is only when the peer that sent it is one of these.
 */
export interface TrustedProxies {
  has(address: string): boolean;
}

const mappedV4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i;
const plain = (address: string) => mappedV4.exec(address)?.[1] ?? address;

/** The trusted proxies of a configuration's TRUSTED_PROXIES (already validated by libs/config). */
export function trustedProxies(
  ranges: readonly { address: string; prefix?: number; family: 4 | 6 }[],
): TrustedProxies | undefined {
  if (ranges.length === 0) return undefined;
  const blocks = new BlockList();
  for (const range of ranges) {
    const type = range.family === 4 ? "ipv4" : "ipv6";
    if (range.prefix === undefined) blocks.addAddress(range.address, type);
    else blocks.addSubnet(range.address, range.prefix, type);
  }
  return {
    has(address) {
      const bare = plain(address);
      const family = isIP(bare);
      return family !== 0 && blocks.check(bare, family === 4 ? "ipv4" : "ipv6");
    },
  };
}

/** Some proxies write the client's port too: `192.0.2.1:5678`, `[2001:db8::1]:5678`. */
function withoutPort(hop: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(hop);
  if (bracketed) return bracketed[1] as string;
  const v4 = /^(\d+\.\d+\.\d+\.\d+):\d+$/.exec(hop);
  return v4 ? (v4[1] as string) : hop;
}

/** The peer address of the request's socket under @hono/node-server; undefined in-process. */
function peerAddress(c: Context): string | undefined {
  const env = c.env as
    | {
        incoming?: { socket?: { remoteAddress?: string } };
        server?: { incoming?: { socket?: { remoteAddress?: string } } };
      }
    | undefined;
  return (env?.server ?? env)?.incoming?.socket?.remoteAddress;
}

/**
 * The client's address: the socket's peer, unless the peer is a trusted proxy (set on the
 * request by newApp's `trustedProxies`); then the rightmost X-Forwarded-For entry that is not a
 * trusted proxy, since each proxy appends the address it saw and only entries added by trusted
 * ones can be believed. Undefined for an in-process `app.request()`.
 */
export function clientAddress(c: Context): string | undefined {
  const peer = peerAddress(c);
  const proxies = (c.var as { trustedProxies?: TrustedProxies }).trustedProxies;
  if (peer === undefined || proxies === undefined || !proxies.has(peer)) return peer;
  const forwarded = c.req.header("x-forwarded-for");
  if (forwarded === undefined) return peer;
  const hops = forwarded.split(",");
  let client = peer;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = plain(withoutPort((hops[i] as string).trim()));
    if (isIP(hop) === 0) break;
    client = hop;
    if (!proxies.has(hop)) break;
  }
  return client;
}
