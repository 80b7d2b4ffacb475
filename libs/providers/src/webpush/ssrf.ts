import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { isIP } from "node:net";
import { isPrivateAddress } from "@notify/core";

/**
 * Push endpoints are URLs users hand us: without a guard, a subscription pointing at
 * http://169.254.169.254/ or an internal admin port would make the worker call it for them.
 */
export interface EndpointPolicy {
  /**
   * Hosts a subscription may point at: exact names, or `*.example.com` for any subdomain.
   * `*` alone allows any public host.
   */
  allowedHosts: string[];
  /** Loopback and private addresses too: the local push sandbox only. */
  allowPrivateNetworks: boolean;
}

/** The push services of the major browsers (Chrome, Firefox, Edge, Safari). */
export const DEFAULT_PUSH_HOSTS = [
  "fcm.googleapis.com",
  "*.push.services.mozilla.com",
  "*.notify.windows.com",
  "*.push.apple.com",
];

export const hostAllowed = (host: string, allowed: string[]): boolean => {
  const name = host.toLowerCase().replace(/^\[|\]$/g, "");
  return allowed.some((pattern) => {
    const p = pattern.toLowerCase();
    if (p === "*") return true;
    if (p.startsWith("*.")) return name.endsWith(p.slice(1)) && name.length > p.length - 1;
    return name === p;
  });
};

/** Why an endpoint may not be called, or undefined when it may (its addresses are checked at connect). */
export function endpointRefusal(endpoint: string, policy: EndpointPolicy): string | undefined {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return "the endpoint is not a URL";
  }
  if (url.protocol !== "https:") return "the endpoint is not https";
  if (url.username !== "" || url.password !== "") return "the endpoint carries credentials";
  const host = url.hostname.replace(/^\[|\]$/g, "");
  if (!hostAllowed(host, policy.allowedHosts)) return `the push service ${host} is not allowed`;
  // An IP literal never reaches the lookup hook below.
  if (isIP(host) !== 0 && !policy.allowPrivateNetworks && isPrivateAddress(host)) {
    return "the endpoint is a private address";
  }
  return undefined;
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for the HTTPS agent that refuses private addresses after resolution, at connect
 * time: checking the name beforehand would let DNS rebinding swap in an internal address.
 */
export const guardedLookup =
  (policy: EndpointPolicy) =>
  (hostname: string, options: { all?: boolean; family?: number }, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, []);
      const refused = !policy.allowPrivateNetworks && addresses.some((a) => isPrivateAddress(a.address));
      if (refused) {
        const denied = Object.assign(new Error(`${hostname} resolves to a private address`), { code: "EPRIVATEADDR" });
        return callback(denied, []);
      }
      if (options.all) return callback(null, addresses);
      const [first] = addresses;
      if (first === undefined)
        return callback(Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" }), []);
      callback(null, first.address, first.family);
    });
  };
