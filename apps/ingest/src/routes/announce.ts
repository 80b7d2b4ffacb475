import type { Context } from "hono";
import type { AuthEnv } from "../auth/middleware.js";

/**
 * A change every instance must see at once (a key revoked or rotated, a template versioned):
 * this instance forgets its cached copy, and every other one hears the announcement on NATS.
 * Where NATS does not take it, the others catch up when their cache entry expires (`within`);
 * the change itself is committed either way.
 */
export async function spreadChange(
  c: Context<AuthEnv>,
  change: { forget?: () => void; announce: () => Promise<boolean>; fields: Record<string, string>; within: string },
): Promise<void> {
  change.forget?.();
  if (!(await change.announce())) {
    c.get("log").warn(change.fields, `change not announced on NATS; other instances see it within ${change.within}`);
  }
}
