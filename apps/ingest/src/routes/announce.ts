import { announceProfileChanged, type Bus } from "@notify/bus";
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

/**
 * A user's preferences or contacts changed: every processor drops what it holds of the user, so
 * the next notification is routed by the change. Where NATS does not take the announcement, the
 * processors' profile cache bound (PREFERENCE_CACHE_TTL_MS) applies; the change is committed
 * either way.
 */
export async function spreadProfileChange(
  log: { warn(fields: object, message: string): void },
  bus: Pick<Bus, "nc" | "naming">,
  userId: string,
): Promise<void> {
  if (!(await announceProfileChanged(bus, { user_id: userId }))) {
    log.warn({ user_id: userId }, "change not announced on NATS; processors see it within PREFERENCE_CACHE_TTL_MS");
  }
}
