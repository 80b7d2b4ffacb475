import { CHANNELS, type Channel } from "./channels.js";
import { privateHostProblem } from "./network.js";
import type { QuietHours } from "./quiet-hours.js";

/**
 * A Web Push subscription as the browser's PushSubscription.toJSON() gives it: the
 * device token for the push channel.
 */
export interface WebPushSubscription {
  endpoint: string;
  expirationTime?: number | null;
  keys: { p256dh: string; auth: string };
}

/** The user preference document. */
export interface UserPreferences {
  channel_optout: Channel[];
  category_optout: string[];
  quiet_hours: QuietHours | null;
  /** Promotional notifications per local day; null means no cap. */
  rate_cap_per_day: number | null;
  device_tokens: WebPushSubscription[];
  /** BCP 47 tag used to pick a template variant; null uses the template's default. */
  locale: string | null;
  /**
   * IANA time zone name (`Europe/London`) in which a notification's `send_at_local` is read;
   * null reads it in the quiet hours' zone, and without quiet hours in UTC.
   */
  time_zone: string | null;
}

/** What a user without a record gets: everything allowed, no quiet hours, no cap, no time zone. */
export const DEFAULT_PREFERENCES: Readonly<UserPreferences> = Object.freeze({
  channel_optout: [],
  category_optout: [],
  quiet_hours: null,
  rate_cap_per_day: null,
  device_tokens: [],
  locale: null,
  time_zone: null,
});

/** Category names, as notifications carry them. */
export const CATEGORY_PATTERN = /^[a-z0-9][a-z0-9_.-]{0,63}$/;

/** Channels in their canonical order, each once. */
export const sortChannels = (channels: readonly Channel[]): Channel[] => CHANNELS.filter((c) => channels.includes(c));

const BASE64URL = /^[A-Za-z0-9_-]+={0,2}$/;

/** Bytes encoded by a base64url string (padding optional), or -1 when it is not base64url. */
export function base64UrlBytes(value: string): number {
  if (!BASE64URL.test(value)) return -1;
  const bare = value.replace(/=+$/, "");
  if (bare.length % 4 === 1) return -1;
  return Math.floor((bare.length * 3) / 4);
}

/**
 * RFC 8291 key material: p256dh is an uncompressed P-256 point (65 bytes, first byte 0x04),
 * auth a 16-byte secret. A malformed key would only fail at send time, as a permanent error.
 */
export function webPushKeyProblems(keys: { p256dh: string; auth: string }): string[] {
  const problems: string[] = [];
  const point = base64UrlBytes(keys.p256dh) === 65 ? Buffer.from(keys.p256dh, "base64url") : null;
  if (point?.[0] !== 0x04) problems.push("keys.p256dh must be a base64url uncompressed P-256 public key");
  if (base64UrlBytes(keys.auth) !== 16) problems.push("keys.auth must be a base64url 16-byte secret");
  return problems;
}

/**
 * Push endpoints are URLs a user supplied: only https, no credentials or fragment, and a public
 * host: no loopback, private, link-local or other non-public address, no `localhost` and no
 * private-use or single-label name, unless `allowPrivateHosts` (the development profile, whose
 * push sandbox listens on 127.0.0.1). This is the first filter; the push worker still guards
 * where it connects (a public name can resolve to a private address).
 */
export function pushEndpointProblem(endpoint: string, options: { allowPrivateHosts?: boolean } = {}): string | null {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return "endpoint must be an absolute URL";
  }
  if (url.protocol !== "https:") return "endpoint must use https";
  if (url.username || url.password) return "endpoint must not carry credentials";
  if (url.hash) return "endpoint must not have a fragment";
  if (!options.allowPrivateHosts) {
    const problem = privateHostProblem(url.hostname);
    if (problem !== null) return `endpoint must be on a public host: ${problem}`;
  }
  return null;
}
