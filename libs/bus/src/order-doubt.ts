/**
 * How long after a sign of disorder a consumer's messages are in doubt: longer than it takes a
 * lost delivery to come back (the ack wait) and a partition to change hands (the lease TTL and
 * an ack wait), with room for the messages held meanwhile.
 */
export const ORDER_DOUBT_MS = 60_000;

/** What the watch needs of a delivery: its consumer sequence and how often it was delivered. */
export interface DeliveryInfo {
  deliverySequence: number;
  deliveryCount: number;
}

/**
 * Whether a delivery may have an earlier message of the same stream still to come after it. A
 * pull consumer read by one runner hands it every delivery, numbered one after another; a
 * delivery arrives behind a later one only after something went wrong, and each leaves a sign:
 *
 * - a gap in the delivery sequence: a delivery lost in transit (a NATS node or the connection
 *   gone with it in flight) or taken by another reader of the consumer (the partition's last
 *   holder, still pulling as it hands over); it comes back after the ack wait, behind this one;
 * - the sequence going back: a new consumer leader that had not heard of the latest deliveries;
 * - a redelivery, or a message this runner sent back (`sentBack`): one that went around while
 *   others passed it;
 * - the runner's start, when the consumer has deliveries not yet acknowledged (`start.inHand`):
 *   the partition may come from an instance still working on its last messages, or one that
 *   died with them in hand. The first delivery must follow the consumer's last one
 *   (`start.lastDelivered`): one that does not follows a delivery to a reader gone since.
 *   Without `start` (unknown) the start is a sign.
 *
 * After any of them, every delivery is in doubt for `doubtMs`; otherwise none is, and the check
 * that costs (the earlier message's state in the database) is left out.
 */
export function createOrderWatch(
  doubtMs = ORDER_DOUBT_MS,
  now: () => number = Date.now,
  start?: { lastDelivered: number; inHand: number },
) {
  let last: number | undefined = start?.lastDelivered;
  let doubtUntil = start === undefined || start.inHand > 0 ? now() + doubtMs : Number.NEGATIVE_INFINITY;
  const doubt = () => {
    doubtUntil = now() + doubtMs;
  };
  return {
    /** Called for each delivery in the order they arrive; answers whether it is in doubt. */
    delivered(info: DeliveryInfo): boolean {
      if (info.deliveryCount > 1 || (last !== undefined && info.deliverySequence !== last + 1)) doubt();
      last = info.deliverySequence;
      return now() < doubtUntil;
    },
    /** Whether a sign came within the window (the deliveries' own answer may be older). */
    inDoubt: (): boolean => now() < doubtUntil,
    /** A message went back to the queue (nak): the next ones of its key may pass it. */
    sentBack: doubt,
    /** The pull was started again (a lost consumer got back, a reconnect): anything may have been lost. */
    restarted: doubt,
  };
}
