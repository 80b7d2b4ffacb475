/**
 * An entry of the suppression list as routing and the workers read it for one of a user's
 * addresses: enough to say why the address is not sent to.
 */
export interface SuppressionHold {
  channel: string;
  /** '' for an entry that holds for every client. */
  client_id: string;
  /** The entry's reason (hard_bounce, spam_complaint, unsubscribe, carrier_opt_out, manual). */
  reason: string;
  /** When the entry was made, ISO 8601. */
  created_at: string;
}

/** The reason of a channel whose address is on the suppression list for its client. */
export const ADDRESS_SUPPRESSED = "address_suppressed";

/**
 * The entry that keeps `channel` of a notification of `clientId` from being sent, among the
 * entries of the user's addresses: one of the client's own or one for every client (''), the
 * oldest when both are there (since when the address is suppressed). Null when none holds.
 */
export function holdingEntry(
  entries: readonly SuppressionHold[],
  channel: string,
  clientId: string,
): SuppressionHold | null {
  let found: SuppressionHold | null = null;
  for (const entry of entries) {
    if (entry.channel !== channel || (entry.client_id !== "" && entry.client_id !== clientId)) continue;
    if (found === null || entry.created_at < found.created_at) found = entry;
  }
  return found;
}

/**
 * What a channel's history row says about the entry that suppressed it: its reason, whom it
 * holds for and since when, e.g. `hard_bounce, every client, since 2025-01-02T03:04:05.000Z`.
 */
export const suppressionDetail = (entry: SuppressionHold): string =>
  `${entry.reason}, ${entry.client_id === "" ? "every client" : "this client"}, since ${entry.created_at}`;
