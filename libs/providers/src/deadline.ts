export const TIMED_OUT = Symbol("timed out");

/**
 * Races a provider call against a deadline. The SDKs' own timeouts (axios, https) only fire on
 * an idle socket, so a server that trickles bytes would otherwise hold a worker forever.
 */
export async function withDeadline<T>(work: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(resolve, ms, TIMED_OUT);
  });
  try {
    return await Promise.race([work, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
