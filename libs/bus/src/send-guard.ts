import type { KV } from "@nats-io/kv";
import type { GuardValue } from "@notify/core";
import { isWrongLastSequence } from "./errors.js";
import { jsonBytes } from "./nats-client.js";

export interface GuardEntry {
  value: GuardValue;
  revision: number;
}

/** The guard as it stands; null when nobody ever claimed it (or its TTL ran out). */
export async function readGuard(kv: KV, key: string): Promise<GuardEntry | null> {
  const entry = await kv.get(key);
  if (entry?.operation !== "PUT") return null;
  return { value: entry.json<GuardValue>(), revision: entry.revision };
}

/** Whether a new attempt may take the guard: never claimed, or refused definitively last time. */
export const isClaimable = (entry: GuardEntry | null): boolean => entry === null || entry.value.state === "failed";

/**
 * Claims the guard for a send (invariant 2), atomically: a create when it was never claimed, a
 * compare-and-set on the revision that was read when the last attempt failed definitively.
 * Answers null when another worker changed it since `seen` was read: the caller looks again.
 */
export async function claimGuard(
  kv: KV,
  key: string,
  seen: GuardEntry | null,
  claim: GuardValue,
): Promise<GuardEntry | null> {
  try {
    const revision =
      seen === null ? await kv.create(key, jsonBytes(claim)) : await kv.update(key, jsonBytes(claim), seen.revision);
    return { value: claim, revision };
  } catch (error) {
    if (isWrongLastSequence(error)) return null;
    // The answer was lost (a timeout, a dropped connection), not necessarily the write. The guard
    // holding exactly this claim means it landed: it is ours, and no provider was called under it.
    const now = await readGuard(kv, key).catch(() => null);
    if (now !== null && JSON.stringify(now.value) === JSON.stringify(claim)) return now;
    throw error;
  }
}

/** Records what became of a claim; only its holder writes, so no compare-and-set is needed. */
export async function settleGuard(kv: KV, key: string, value: GuardValue): Promise<void> {
  await kv.put(key, jsonBytes(value));
}
