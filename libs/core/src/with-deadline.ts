import { setImmediate as nextTurn } from "node:timers/promises";

export const TIMED_OUT = Symbol("timed out");

/**
 * Races a call (a provider's, a count) against a deadline. The SDKs' own timeouts (axios, https)
 * only fire on an idle socket, so a server that trickles bytes would otherwise hold a worker
 * forever.
 *
 * When this process is stalled (CPU starvation, a long GC, a blocked write), the timer and the
 * answer both wait at once, and timers run before I/O in Node's loop: the deadline would win
 * over an answer that arrived in time. So the timer lets the loop take in waiting I/O (two
 * turns: the response, then its end) before it calls the call late. A send that reached the
 * provider and was answered is then recorded as answered, not as an unknown outcome.
 */
export async function withDeadline<T, L = typeof TIMED_OUT>(
  work: Promise<T>,
  ms: number,
  late: L = TIMED_OUT as L,
): Promise<T | L> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<L>((resolve) => {
    timer = setTimeout(async () => {
      await nextTurn();
      await nextTurn();
      resolve(late);
    }, ms);
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
