import type { Channel } from "@notify/core";

/** The channel of one notification, as a worker or the processor names it. */
export interface ChannelRef {
  notification_id: string;
  channel: Channel;
  /**
   * The channel's user, when the caller has it (a work item carries it): the attempt lines a
   * status move writes then take it from here instead of looking the channel row up.
   */
  user_id?: string;
}

/** A channel's key in a batch: one notification's channels, and each channel, apart. */
export const refKey = (ref: ChannelRef) => `${ref.notification_id}\u0000${ref.channel}`;
