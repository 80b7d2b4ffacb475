import { AppError } from "@notify/core";
import type { Context, MiddlewareHandler } from "hono";
import { limitBody } from "./body.js";
import { clientAddress } from "./client-address.js";
import { type AttemptBudget, type AttemptThrottle, addressBucket } from "./throttle.js";

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
  /**
   * Of those, the reads of one source address (an IPv6 address counts by its /64, as in the
   * attempt throttle): one beyond it is answered 429 with Retry-After before anything of it is
   * read, so no one address can hold every read, and of the over-budget reads it holds at most
   * one.
   */
  maxReadsPerAddress: number;
  /**
   * How long, in ms from its admission, a body has to arrive whole: one that has not is
   * abandoned (answered 408 and its connection closed), its read freed, and its attempt stays
   * spent. Shorter than the server's request timeout, so a slow body holds a read for this long
   * at most.
   */
  readTimeoutMs: number;
  /** Retry-After of the 503 and of the 429s (default 1 s: most reads end within milliseconds). */
  retryAfterSeconds?: number;
}

export interface UnverifiedReads {
  /**
   * The middleware of a route that must read its body before it can verify it, up to
   * `maxBytes`: a declared Content-Length over it is a 413 before anything else (no read, no
   * attempt spent); then the read is admitted or refused (429 when the address holds its share
   * of the reads, 503 when every read is taken, 429 when the address is out of attempts and the
   * over-budget reads, or its one of them, are taken), and a body sent without a length is
   * counted as it streams in, within the admitted read, until the read's deadline.
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
  /** The address bucket the read counts in; undefined for an in-process request (no socket). */
  bucket: string | undefined;
  overBudget: boolean;
  open: boolean;
  verified: boolean;
  /** The body did not arrive by the deadline: the connection is closed, the answer is a 408. */
  abandoned: boolean;
  deadline: ReturnType<typeof setTimeout> | undefined;
}

/** The node connection of a request under @hono/node-server; undefined in-process. */
interface Connection {
  incoming: { complete: boolean; destroy(error?: Error): void };
  socket: { writable: boolean; write(data: string): unknown };
  outgoing: { headersSent: boolean } | undefined;
}

function connectionOf(c: Context): Connection | undefined {
  type Env = { incoming?: Partial<Connection["incoming"]> & { socket?: unknown }; outgoing?: unknown };
  const env = c.env as (Env & { server?: Env }) | undefined;
  const node = env?.server ?? env;
  const incoming = node?.incoming;
  const socket = incoming?.socket as Partial<Connection["socket"]> | undefined;
  if (typeof incoming?.complete !== "boolean" || typeof incoming.destroy !== "function") return undefined;
  if (typeof socket?.write !== "function") return undefined;
  return {
    incoming: incoming as Connection["incoming"],
    socket: socket as Connection["socket"],
    outgoing: node?.outgoing as Connection["outgoing"],
  };
}

/** The answer to an abandoned read: a problem (RFC 9457), as every other refusal. */
const timeoutProblem = (readTimeoutMs: number) =>
  JSON.stringify({
    type: "about:blank",
    title: "Request Timeout",
    status: 408,
    detail: `the request body did not arrive within ${readTimeoutMs} ms; it was not processed`,
  });

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
 * - No address holds more than `maxReadsPerAddress` of them, nor more than one over-budget
 *   read, and no read lasts longer than `readTimeoutMs`: a client sending its bodies slowly
 *   holds a few reads for a while, never every read, so others' signed posts are still read.
 */
export function createUnverifiedReads(throttle: AttemptThrottle, limits: UnverifiedReadLimits): UnverifiedReads {
  const { maxReads, maxOverBudgetReads, maxReadsPerAddress, readTimeoutMs } = limits;
  const retryAfterSeconds = limits.retryAfterSeconds ?? 1;
  const reads = new WeakMap<Context, Read>();
  let all = 0;
  let overBudget = 0;
  /** Open reads per address bucket; a bucket with none is removed. */
  const byBucket = new Map<string, number>();
  /** The buckets holding an over-budget read (one each at most). */
  const overBudgetBuckets = new Set<string>();

  const release = (read: Read) => {
    clearTimeout(read.deadline);
    if (!read.open) return;
    read.open = false;
    all -= 1;
    if (read.overBudget) overBudget -= 1;
    if (read.bucket === undefined) return;
    if (read.overBudget) overBudgetBuckets.delete(read.bucket);
    const left = (byBucket.get(read.bucket) ?? 1) - 1;
    if (left > 0) byBucket.set(read.bucket, left);
    else byBucket.delete(read.bucket);
  };

  const addressRefusal = (why: string) =>
    new AppError("rate_limited", `${why}; nothing was read, retry after ${retryAfterSeconds} s`, {
      context: { retryAfterSeconds },
    });

  /** Admits one read or throws the refusal; nothing of the body has been read either way. */
  const admit = (c: Context): Read => {
    const address = clientAddress(c);
    const bucket = address === undefined || address === "" ? undefined : addressBucket(address);
    if (bucket !== undefined && (byBucket.get(bucket) ?? 0) >= maxReadsPerAddress) {
      throw addressRefusal(
        `this address is already sending as many unauthenticated request bodies as it may at once (${maxReadsPerAddress})`,
      );
    }
    if (all >= maxReads) {
      throw new AppError(
        "dependency_unavailable",
        `this process is reading as many unauthenticated request bodies as it allows (${maxReads}); nothing was read, retry after ${retryAfterSeconds} s`,
        { context: { retryAfterSeconds } },
      );
    }
    const budget = throttle.budget(address);
    let spent = false;
    try {
      budget.check();
    } catch (refused) {
      if (!(refused instanceof AppError)) throw refused;
      // The lane frees as soon as one of its reads ends, long before the budget refills.
      if (overBudget >= maxOverBudgetReads) {
        throw addressRefusal(
          "too many failed authentication attempts from this address, and the reads allowed for such addresses are taken",
        );
      }
      if (bucket !== undefined && overBudgetBuckets.has(bucket)) {
        throw addressRefusal(
          "too many failed authentication attempts from this address, and it already holds its one read allowed for such addresses",
        );
      }
      spent = true;
    }
    // Check and charge run in one turn of the event loop: parallel posts cannot share an attempt.
    if (!spent) budget.charge();
    all += 1;
    if (spent) overBudget += 1;
    if (bucket !== undefined) {
      byBucket.set(bucket, (byBucket.get(bucket) ?? 0) + 1);
      if (spent) overBudgetBuckets.add(bucket);
    }
    return { budget, bucket, overBudget: spent, open: true, verified: false, abandoned: false, deadline: undefined };
  };

  /**
   * The deadline passed with the body still arriving: the read is freed now, the client is
   * answered 408 as Node answers its own request timeout (written to the socket, which then
   * closes), and the body read fails, so nothing more of it is held. The attempt is not given
   * back. A body that has arrived whole is left to be verified.
   */
  const abandon = (c: Context, read: Read) => {
    const connection = connectionOf(c);
    if (!read.open || connection === undefined || connection.incoming.complete) return;
    read.abandoned = true;
    release(read);
    if (connection.socket.writable && connection.outgoing?.headersSent !== true) {
      const body = timeoutProblem(readTimeoutMs);
      connection.socket.write(
        `HTTP/1.1 408 Request Timeout\r\nContent-Type: application/problem+json\r\nCache-Control: no-store\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    }
    // A problem below 500: the route's failed read is not logged as an error.
    connection.incoming.destroy(
      new AppError("invalid_request", `the request body did not arrive within ${readTimeoutMs} ms`),
    );
  };

  const run = async (c: Context, next: () => Promise<void>) => {
    const read = admit(c);
    reads.set(c, read);
    read.deadline = setTimeout(() => abandon(c, read), readTimeoutMs);
    read.deadline.unref?.();
    try {
      await next();
    } catch (error) {
      // The failed read of an abandoned body, thrown past the route (a streamed body's count).
      if (!read.abandoned) throw error;
    } finally {
      release(read);
      // Charging an empty bucket keeps it empty: its refill is spent on the failure.
      if (!read.verified && read.overBudget) read.budget.charge();
    }
    if (read.abandoned) {
      // What the access log and the metrics record: the answer the client was sent.
      c.res = undefined;
      c.res = new Response(timeoutProblem(readTimeoutMs), {
        status: 408,
        headers: { "content-type": "application/problem+json", "cache-control": "no-store" },
      });
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
      if (read === undefined || read.verified || read.abandoned) return;
      read.verified = true;
      release(read);
      if (!read.overBudget) read.budget.refund();
    },
  };
}
