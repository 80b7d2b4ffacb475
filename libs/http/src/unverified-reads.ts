import { AppError } from "@notify/core";
import type { Context, MiddlewareHandler } from "hono";
import { limitBody } from "./body.js";
import { clientAddress } from "./client-address.js";
import type { AttemptBudget, AttemptThrottle } from "./throttle.js";

export interface UnverifiedReadLimits {
  /**
   * Request bodies this process reads at once before their credential can be checked (a
   * webhook's signature covers its body): beyond it a request is answered 503 with Retry-After
   * before anything of it is read, so unauthenticated posts hold at most this many bodies.
   */
  maxReads: number;
  /**
   * Of those, the reads for addresses whose failed-attempt budget is spent, all such addresses
   * together: their posts are still read and verified, but only this many at a time, and one
   * beyond it is answered 429 with Retry-After. 0 refuses every post of such an address.
   */
  maxOverBudgetReads: number;
  /** Retry-After of the 503 and of the 429 (default 1 s: most reads end within milliseconds). */
  retryAfterSeconds?: number;
}

export interface UnverifiedReads {
  /**
   * The middleware of a route that must read its body before it can verify it, up to
   * `maxBytes`: a declared Content-Length over it is a 413 before anything else (no read, no
   * attempt spent); then the read is admitted or refused (503 when every read is taken, 429
   * when the address is out of attempts and the over-budget reads are taken), and a body sent
   * without a length is counted as it streams in, within the admitted read.
   */
  guard(maxBytes: number): MiddlewareHandler;
  /**
   * The route verified the request's credential: its read stops counting as unverified, and an
   * address within its budget gets its reserved attempt back. Without this call, the attempt
   * stays spent when the request ends, whatever its answer.
   */
  verified(c: Context): void;
}

interface Read {
  budget: AttemptBudget;
  overBudget: boolean;
  open: boolean;
  verified: boolean;
}

/**
 * Reads of request bodies that are not yet authenticated, bounded in this process and charged
 * to the source address before they start (libs/http's attempt throttle):
 *
 * - An address within its budget reserves one attempt before its body is read; the attempt is
 *   given back when the credential verifies, so valid posts cost nothing and a burst of
 *   parallel bad posts cannot all start on the same last attempt.
 * - An address whose budget is spent is not refused outright: a provider's shared egress
 *   address fails signatures whenever anyone points their own account at our URL, and its
 *   genuine posts must still get through. Its posts go through a small lane of their own
 *   (`maxOverBudgetReads` for all such addresses together); a failure there keeps the budget
 *   empty, a verified post is processed like any other.
 * - Every read counts against `maxReads`, so unverified bodies in memory stay below
 *   maxReads × the route's body limit, however many connections are open.
 */
export function createUnverifiedReads(throttle: AttemptThrottle, limits: UnverifiedReadLimits): UnverifiedReads {
  const { maxReads, maxOverBudgetReads } = limits;
  const retryAfterSeconds = limits.retryAfterSeconds ?? 1;
  const reads = new WeakMap<Context, Read>();
  let all = 0;
  let overBudget = 0;

  const release = (read: Read) => {
    if (!read.open) return;
    read.open = false;
    all -= 1;
    if (read.overBudget) overBudget -= 1;
  };

  /** Admits one read or throws the refusal; nothing of the body has been read either way. */
  const admit = (c: Context): Read => {
    if (all >= maxReads) {
      throw new AppError(
        "dependency_unavailable",
        `this process is reading as many unauthenticated request bodies as it allows (${maxReads}); nothing was read, retry after ${retryAfterSeconds} s`,
        { context: { retryAfterSeconds } },
      );
    }
    const budget = throttle.budget(clientAddress(c));
    let spent = false;
    try {
      budget.check();
    } catch (refused) {
      if (!(refused instanceof AppError)) throw refused;
      // The lane frees as soon as one of its reads ends, long before the budget refills.
      if (overBudget >= maxOverBudgetReads) {
        throw new AppError(
          "rate_limited",
          `too many failed authentication attempts from this address, and the reads allowed for such addresses are taken; retry after ${retryAfterSeconds} s`,
          { context: { retryAfterSeconds } },
        );
      }
      spent = true;
    }
    // Check and charge run in one turn of the event loop: parallel posts cannot share an attempt.
    if (!spent) budget.charge();
    all += 1;
    if (spent) overBudget += 1;
    return { budget, overBudget: spent, open: true, verified: false };
  };

  const run = async (c: Context, next: () => Promise<void>) => {
    const read = admit(c);
    reads.set(c, read);
    try {
      await next();
    } finally {
      release(read);
      // Charging an empty bucket keeps it empty: its refill is spent on the failure.
      if (!read.verified && read.overBudget) read.budget.charge();
    }
  };

  return {
    guard(maxBytes) {
      const limit = limitBody(maxBytes);
      return (c, next) => {
        // A declared length is judged from the header alone, before the read is admitted;
        // a streamed body is counted while it is read, inside the admitted read.
        if (c.req.header("content-length") !== undefined) return limit(c, () => run(c, next));
        return run(c, () => limit(c, next) as Promise<void>);
      };
    },
    verified(c) {
      const read = reads.get(c);
      if (read === undefined || read.verified) return;
      read.verified = true;
      release(read);
      if (!read.overBudget) read.budget.refund();
    },
  };
}
