import { AppError, type BucketDecision, type BucketLimits, leak, type MaybePromise } from "@notify/core";

export type Admitted = BucketDecision & { limits: BucketLimits };

export interface RateLimiter {
  /**
   * Admits the request (after its wait in the queue: a promise only when there is one) or
   * throws a 429 problem.
   */
  admit(keyId: string, limits: BucketLimits | null): MaybePromise<Admitted>;
}

/** IETF RateLimit draft headers: the policy (queue size over the time it takes to drain) and now. */
export function rateLimitHeaders(decision: BucketDecision, limits: BucketLimits): Record<string, string> {
  const window = Math.max(1, Math.ceil(limits.burst / limits.perSecond));
  return {
    "ratelimit-policy": `"default";q=${limits.burst};w=${window}`,
    ratelimit: `"default";r=${decision.remaining};t=${decision.resetSeconds}`,
  };
}

/**
 * One leaky bucket per API key, in this process. With several ingest processes each keeps its
 * own buckets, so a key's effective limit is the configured one times the number of processes
 * behind the load balancer (docs/api.md: Rate limits).
 */
export function createRateLimiter(defaults: BucketLimits, now: () => number = Date.now): RateLimiter {
  const buckets = new Map<string, number>();
  return {
    admit(keyId, own) {
      const limits = own ?? defaults;
      const at = now();
      if (buckets.size > 100_000) {
        for (const [id, drainedAt] of buckets) if (drainedAt < at) buckets.delete(id);
      }
      const { decision, drainedAt } = leak(buckets.get(keyId) ?? 0, at, limits);
      if (!decision.allowed) {
        throw new AppError(
          "rate_limited",
          `this API key allows ${limits.perSecond} requests per second with a queue of ${limits.burst}`,
          {
            context: { retryAfterSeconds: decision.retryAfterSeconds, headers: rateLimitHeaders(decision, limits) },
          },
        );
      }
      buckets.set(keyId, drainedAt);
      // Written out: spreading the decision (number fields that are sometimes fractions) takes V8's
      // slow path, on every request.
      const admitted: Admitted = {
        allowed: decision.allowed,
        delayMs: decision.delayMs,
        remaining: decision.remaining,
        resetSeconds: decision.resetSeconds,
        retryAfterSeconds: decision.retryAfterSeconds,
        limits,
      };
      if (decision.delayMs < 1) return admitted;
      return new Promise<Admitted>((resolve) => setTimeout(() => resolve(admitted), decision.delayMs));
    },
  };
}
