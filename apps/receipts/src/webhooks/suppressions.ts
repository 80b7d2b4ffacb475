import { suppressionAddress } from "@notify/core";
import { addSuppressions, type Database, type NewSuppression, type SuppressionReason } from "@notify/db";
import type { ReceiptMetrics } from "./metrics.js";

/**
 * What providers report about an address itself, for the suppression list. Every entry holds for
 * every client (client_id ''): a hard bounce, a spam complaint or an opt-out is about the address
 * and the sending domain or number all clients share.
 */

const text = (value: unknown): string | undefined =>
  typeof value === "string" ? value.trim().toLowerCase() : undefined;

/**
 * The dropped reasons that say why the address itself is refused (SendGrid drops mail to
 * addresses on its own suppression lists). Others ("Invalid SMTPAPI header", "Spam Content",
 * "Recipient List over Package Quota") are about the message or the account.
 */
const DROPPED: Record<string, SuppressionReason> = {
  invalid: "hard_bounce",
  "bounced address": "hard_bounce",
  "spam reporting address": "spam_complaint",
  "unsubscribed address": "unsubscribe",
};

/**
 * The bounce classifications that are about the address (SendGrid's `bounce_classification`).
 * The others (Content, Reputation, Technical, Frequency/Volume) are about the sender or the
 * message: suppressing the address would punish the recipient for the sender's problem.
 */
const ADDRESS_BOUNCES = new Set(["invalid address", "mailbox unavailable", "unclassified"]);

/**
 * The reason a SendGrid event puts its address on the list, or null. A `bounce` of type `bounce`
 * (or of no type, which its receipt also reads as a hard bounce) is a hard bounce, unless its
 * classification says the sender was refused rather than the address (an event without a
 * classification counts as the address's); of type `blocked` a temporary refusal by the
 * receiving server, which says nothing lasting about the address.
 */
export function sendgridSuppressionReason(event: Record<string, unknown>): SuppressionReason | null {
  switch (event.event) {
    case "bounce": {
      if (event.type !== undefined && event.type !== "bounce") return null;
      const classification = text(event.bounce_classification);
      return classification === undefined || ADDRESS_BOUNCES.has(classification) ? "hard_bounce" : null;
    }
    case "dropped":
      return DROPPED[text(event.reason) ?? ""] ?? null;
    case "spamreport":
      return "spam_complaint";
    case "unsubscribe":
    case "group_unsubscribe":
      return "unsubscribe";
    default:
      return null;
  }
}

/** The entry a SendGrid event adds, or null: none for its kind, or no email address in it. */
export function sendgridSuppression(event: Record<string, unknown>, eventId: string): NewSuppression | null {
  const reason = sendgridSuppressionReason(event);
  const address = typeof event.email === "string" ? suppressionAddress("email", event.email) : null;
  if (reason === null || address === null) return null;
  return {
    channel: "email",
    address,
    client_id: "",
    reason,
    source: {
      provider: "sendgrid",
      event: event.event as string,
      event_id: eventId,
      ...(typeof event.notification_id === "string" ? { notification_id: event.notification_id } : {}),
    },
  };
}

/**
 * Plivo's delivery-report error codes that say the number itself cannot receive: 50 (invalid
 * destination: not SMS-enabled, a landline, malformed) and 70 (destination permanently
 * unavailable). Never the temporary ones (20 network error, 80 temporarily unavailable), nor
 * those about the message, the sender or the route (10, 30, 40, 60, 90, 100, 110, 201, 1000).
 * 200 is the carrier's record of the number's STOP to our sending number: an opt-out.
 */
const PLIVO_ERRORS: Record<string, SuppressionReason> = {
  "50": "hard_bounce",
  "70": "hard_bounce",
  "200": "carrier_opt_out",
};

/** The entry a Plivo delivery report adds, or null. */
export function plivoReportSuppression(report: {
  status: string;
  errorCode: string | undefined;
  to: string | undefined;
  eventId: string;
  notificationId: string | null;
}): NewSuppression | null {
  if (report.status !== "undelivered" && report.status !== "failed" && report.status !== "rejected") return null;
  const reason = PLIVO_ERRORS[report.errorCode?.trim() ?? ""];
  const address = report.to === undefined ? null : suppressionAddress("sms", report.to);
  if (reason === undefined || address === null) return null;
  return {
    channel: "sms",
    address,
    client_id: "",
    reason,
    source: {
      provider: "plivo",
      event: `${report.status}:${report.errorCode?.trim()}`,
      event_id: report.eventId,
      ...(report.notificationId ? { notification_id: report.notificationId } : {}),
    },
  };
}

/**
 * Adds the entries of one webhook post: one statement per reason among them (at most the few
 * reasons, never one per event), so the metric counts what was added by reason. Entries already
 * on the list are left as they are (the first reason stays); a provider's retry adds nothing.
 */
export async function addReported(
  database: Database,
  entries: readonly NewSuppression[],
  metrics: ReceiptMetrics,
  provider: string,
): Promise<number> {
  const byReason = new Map<SuppressionReason, NewSuppression[]>();
  for (const entry of entries) {
    const group = byReason.get(entry.reason);
    if (group === undefined) byReason.set(entry.reason, [entry]);
    else group.push(entry);
  }
  let added = 0;
  for (const [reason, group] of byReason) {
    const n = await addSuppressions(database, group);
    if (n > 0) metrics.suppressed.inc({ provider, reason }, n);
    added += n;
  }
  return added;
}
