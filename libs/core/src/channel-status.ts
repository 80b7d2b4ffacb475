/**
 * Per-channel delivery status: a closed set. Status only moves forward (invariant 3): a
 * transition to a lower rank is refused, so late or repeated updates never regress a channel.
 *
 * - pending: routed to the channel queue, not yet sent
 * - deferred: held until a planned time (quiet hours)
 * - retrying: a transient provider failure, another attempt is scheduled
 * - parked: the provider's circuit breaker is open; held without spending attempts
 * - unsettled: the provider may have accepted a send whose result was never recorded; only a
 *   receipt can settle it, it is never resent
 * - suppressed: a preference decided not to send (reason says which)
 * - delivered: the provider accepted (or confirmed) the message
 * - bounced: the provider reported a bounce (reason)
 * - failed: dead-lettered: a permanent failure or retries used up (reason)
 * - expired: its deliver-by deadline passed before it was sent; never sent late (reason)
 * - canceled: its client canceled it before it was sent (POST /notifications/{id}/cancel); never
 *   sent. Only a waiting channel (pending, deferred, retrying, parked) is canceled, and nothing
 *   follows it, not even a bounce: no provider ever had it
 */
export const CHANNEL_STATUSES = [
  "pending",
  "deferred",
  "retrying",
  "parked",
  "unsettled",
  "suppressed",
  "delivered",
  "bounced",
  "failed",
  "expired",
  "canceled",
] as const;
export type ChannelStatus = (typeof CHANNEL_STATUSES)[number];

const RANK: Record<ChannelStatus, number> = {
  pending: 0,
  deferred: 1,
  retrying: 1,
  parked: 1,
  unsettled: 2,
  suppressed: 3,
  delivered: 3,
  failed: 3,
  expired: 3,
  canceled: 3,
  bounced: 4,
};

/** Statuses from which no further transition is expected, except a receipt's bounce. */
export const isFinal = (status: ChannelStatus): boolean => RANK[status] >= 3;

/**
 * Whether a channel may move from `from` to `to`. The "waiting" statuses (deferred, retrying,
 * parked) may follow each other and themselves (another attempt, a new planned time); a final
 * status never repeats or moves back, though a delivered message may still bounce (receipts
 * arrive later than the send). A cancel reaches only a channel still waiting (an unsettled one
 * may have been accepted), and a canceled channel, never sent, has nothing after it.
 */
export function canTransition(from: ChannelStatus, to: ChannelStatus): boolean {
  if (from === "canceled") return false;
  if (to === "canceled") return RANK[from] <= 1;
  const a = RANK[from];
  const b = RANK[to];
  if (b > a) return true;
  return a === b && a === 1;
}

/** The statuses a channel may be in for a move to `to`: the guard of a status UPDATE. */
export const statusesMovableTo = (to: ChannelStatus): ChannelStatus[] =>
  CHANNEL_STATUSES.filter((from) => canTransition(from, to));
