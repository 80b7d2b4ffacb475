/**
 * Claims this process wrote but never used: the write's answer was lost (a NATS timeout) and
 * reading the guard back failed as well, so the item went back to the queue. When it returns to
 * this process and finds that very claim (same worker, same time), no provider call began under
 * it: the claim is taken over at once instead of being waited out and called unknown, which
 * would leave a notification that was never sent unsettled. Another process cannot know this
 * and treats the claim as any other. Bounded; the oldest are forgotten first.
 */
export interface UnusedClaims {
  remember(key: string, at: number): void;
  /** Whether the claim `(key, at)` was remembered as unused; forgets it. */
  take(key: string, at: number): boolean;
}

export function createUnusedClaims(limit = 10_000): UnusedClaims {
  const claims = new Map<string, number>();
  return {
    remember(key, at) {
      claims.delete(key);
      claims.set(key, at);
      if (claims.size > limit) claims.delete(claims.keys().next().value as string);
    },
    take(key, at) {
      if (claims.get(key) !== at) return false;
      claims.delete(key);
      return true;
    },
  };
}
