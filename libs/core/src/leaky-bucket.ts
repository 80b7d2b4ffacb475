/**
 * The inbound leaky bucket: a queue of `burst` requests drained at
 * `perSecond`. A request that finds the queue full is refused; otherwise it is queued and
 * released at the outflow rate. Tracked as the time the queue will be empty (`drainedAt`),
 * which is all the state a bucket needs; pure, so that the policy can be tested alone.
 */
export interface BucketLimits {
  burst: number;
  perSecond: number;
}

export interface BucketDecision {
  allowed: boolean;
  /** How long an admitted request waits in the queue before it is processed (ms). */
  delayMs: number;
  /** Free places in the queue after this decision. */
  remaining: number;
  /** Seconds until the queue is empty again. */
  resetSeconds: number;
  /** For a refusal: seconds until a place frees up. */
  retryAfterSeconds: number;
}

export function leak(
  drainedAt: number,
  now: number,
  limits: BucketLimits,
): { decision: BucketDecision; drainedAt: number } {
  const interval = 1000 / limits.perSecond;
  const start = Math.max(now, drainedAt);
  const queued = (start - now) / interval;
  if (queued + 1 > limits.burst) {
    const waitMs = (queued + 1 - limits.burst) * interval;
    return {
      drainedAt,
      decision: {
        allowed: false,
        delayMs: 0,
        remaining: 0,
        resetSeconds: Math.ceil((start - now) / 1000),
        retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)),
      },
    };
  }
  const next = start + interval;
  return {
    drainedAt: next,
    decision: {
      allowed: true,
      // The request is processed when the ones before it have left the queue.
      delayMs: start - now,
      remaining: Math.max(0, Math.floor(limits.burst - (queued + 1))),
      resetSeconds: Math.ceil((next - now) / 1000),
      retryAfterSeconds: 0,
    },
  };
}
