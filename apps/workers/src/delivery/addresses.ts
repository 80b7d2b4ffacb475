import { createHash } from "node:crypto";
import type { WorkItem } from "@notify/core";

/** One provider call's destination within a work item. */
export interface Address {
  /** Stable short id, kept in the send guard to remember which addresses are done. */
  key: string;
  /** What the provider gets as `to`. */
  to: string;
  /** Push only: the subscription's endpoint, which identifies it among the user's device tokens. */
  endpoint: string | null;
}

const keyOf = (text: string) => createHash("sha256").update(text).digest("base64url").slice(0, 16);

/**
 * The provider calls a work item needs. Email, SMS and in-app have one address. A push item
 * carries every subscription of the user (the processor routes the user, not a device), and each
 * subscription is its own call to its own push service, with its own result: one may be gone
 * while another accepts.
 */
export function addressesOf(item: WorkItem): Address[] {
  const single = [{ key: keyOf(item.to), to: item.to, endpoint: null }];
  if (item.channel !== "push") return single;
  let parsed: unknown;
  try {
    parsed = JSON.parse(item.to);
  } catch {
    // The push provider refuses it permanently, with its own reason.
    return single;
  }
  const addresses = new Map<string, Address>();
  for (const subscription of Array.isArray(parsed) ? parsed : [parsed]) {
    const to = JSON.stringify(subscription);
    const endpoint = (subscription as { endpoint?: unknown } | null)?.endpoint;
    const id = typeof endpoint === "string" ? endpoint : to;
    addresses.set(keyOf(id), { key: keyOf(id), to, endpoint: typeof endpoint === "string" ? endpoint : null });
  }
  return [...addresses.values()];
}
