import { isIP } from "node:net";
import { AppError } from "@notify/core";
import { LRUCache } from "lru-cache";

/**
 * What one source address may still spend on failed authentication: `check` before work that
 * cannot yet tell a valid credential from a random one, `charge` for a failure (or a
 * reservation), `refund` to give a reservation back.
 */
export interface AttemptBudget {
  /** Throws a 429 problem (with Retry-After) when the address has no attempt left. */
  check(): void;
  /** Spends one attempt (never below zero). */
  charge(): void;
  /** Gives one attempt back (never above the burst). */
  refund(): void;
}

export interface AttemptThrottle {
  /** The budget of one address; undefined (no socket: an in-process request) is never throttled. */
  budget(address: string | undefined): AttemptBudget;
}

export interface AttemptThrottleOptions {
  /** Attempts an address regains per second. */
  perSecond: number;
  /** Attempts an address may spend at once. */
  burst: number;
  /** Addresses remembered at most (least recently seen forgotten first). */
  maxAddresses?: number;
  now?: () => number;
}

const FREE: AttemptBudget = { check() {}, charge() {}, refund() {} };

/**
 * The bucket an address counts in: an IPv4 address itself (an IPv4-mapped IPv6 address as its
 * IPv4), an IPv6 address by its /64, since one host is routinely handed a whole /64.
 */
export function addressBucket(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped?.[1]) return mapped[1];
  if (isIP(address) !== 6) return address;
  const [head = "", tail] = address.toLowerCase().split("::");
  const left = head === "" ? [] : head.split(":");
  const right = tail === undefined || tail === "" ? [] : tail.split(":");
  const groups = tail === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill("0"), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ""))
    .join(":")}::/64`;
}

/**
 * A token bucket per source address, in a bounded LRU, for what happens before a client is
 * authenticated: failed credentials spend the address's attempts, and once they are spent the
 * address is answered 429 with Retry-After without any lookup. Valid credentials cost nothing,
 * so a busy client is never slowed by it; only a stream of unknown keys or bad signatures is.
 * In this process only, like the per-key limits.
 */
export function createAttemptThrottle(options: AttemptThrottleOptions): AttemptThrottle {
  const now = options.now ?? Date.now;
  const { perSecond, burst } = options;
  const buckets = new LRUCache<string, { tokens: number; at: number }>({ max: options.maxAddresses ?? 100_000 });

  const fill = (key: string) => {
    const at = now();
    const bucket = buckets.get(key) ?? { tokens: burst, at };
    bucket.tokens = Math.min(burst, bucket.tokens + ((at - bucket.at) / 1000) * perSecond);
    bucket.at = at;
    buckets.set(key, bucket);
    return bucket;
  };

  /**
   * One address's budget. The bucket key is worked out, and the bucket touched, only when the
   * budget is used: a valid key never uses it, and this runs on every authenticated request.
   */
  class AddressBudget implements AttemptBudget {
    #key: string | undefined;
    constructor(private readonly address: string) {}
    get key(): string {
      this.#key ??= addressBucket(this.address);
      return this.#key;
    }
    check(): void {
      const bucket = fill(this.key);
      if (bucket.tokens >= 1) return;
      const retryAfterSeconds = Math.max(1, Math.ceil((1 - bucket.tokens) / perSecond));
      throw new AppError(
        "rate_limited",
        `too many failed authentication attempts from this address; retry after ${retryAfterSeconds} s`,
        { context: { retryAfterSeconds } },
      );
    }
    charge(): void {
      const bucket = fill(this.key);
      bucket.tokens = Math.max(0, bucket.tokens - 1);
    }
    refund(): void {
      const bucket = fill(this.key);
      bucket.tokens = Math.min(burst, bucket.tokens + 1);
    }
  }

  return {
    budget: (address) => (address === undefined || address === "" ? FREE : new AddressBudget(address)),
  };
}
