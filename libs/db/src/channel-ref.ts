import type { Channel } from "@notify/core";

/** The channel of one notification, as a worker or the processor names it. */
export interface ChannelRef {
  notification_id: string;
  channel: Channel;
}

/** A channel's key in a batch: one notification's channels, and each channel, apart. */
export const refKey = (ref: ChannelRef) => `${ref.notification_id}\u0000${ref.channel}`;
