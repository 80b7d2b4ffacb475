import type { Counter, MetricsRegistry } from "@notify/http";

/** What the webhooks count; no-ops when the app runs without a registry (most tests). */
export interface ReceiptMetrics {
  /**
   * Requests refused whole (reason: signature, v2_only, timestamp, malformed) and events
   * refused inside an accepted batch (not_an_object, invalid_utf8, invalid_event, unstorable).
   */
  rejected: Counter;
  /** Events stored after a repair (reason: unstorable_text, unknown_fields). */
  repaired: Counter;
  /**
   * Entries added to the suppression list from what providers report (provider: sendgrid,
   * plivo; reason: hard_bounce, spam_complaint, unsubscribe, carrier_opt_out).
   */
  suppressed: Counter;
}

const none: Counter = { inc: () => {} };

export function receiptMetrics(metrics: MetricsRegistry | undefined): ReceiptMetrics {
  if (metrics === undefined) return { rejected: none, repaired: none, suppressed: none };
  return {
    rejected: metrics.counter(
      "notify_receipts_rejected_total",
      "Provider webhook requests or events refused, by provider and reason",
      ["provider", "reason"],
    ),
    repaired: metrics.counter(
      "notify_receipts_repaired_total",
      "Provider events stored after dropping unknown fields or replacing text Postgres cannot store",
      ["provider", "reason"],
    ),
    suppressed: metrics.counter(
      "notify_receipts_suppressions_added_total",
      "Addresses added to the suppression list from provider reports, by provider and reason",
      ["provider", "reason"],
    ),
  };
}
