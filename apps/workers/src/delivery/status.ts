import type { ChannelStatus } from "@notify/core";

/** Statuses a worker may still send from; anything else is settled (or being replayed). */
export const SENDABLE: readonly ChannelStatus[] = ["pending", "deferred", "retrying", "parked"];
