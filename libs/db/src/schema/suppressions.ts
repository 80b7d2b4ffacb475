import { sql } from "drizzle-orm";
import { check, index, jsonb, pgTable, primaryKey, text, timestamp } from "drizzle-orm/pg-core";

/** Why an address is suppressed. */
export const SUPPRESSION_REASONS = [
  "hard_bounce",
  "spam_complaint",
  "unsubscribe",
  "carrier_opt_out",
  "manual",
] as const;
export type SuppressionReason = (typeof SUPPRESSION_REASONS)[number];

/** The channels whose addresses can be suppressed: the ones sent to an address a user gave. */
export const SUPPRESSIBLE_CHANNELS = ["email", "sms"] as const;
export type SuppressibleChannel = (typeof SUPPRESSIBLE_CHANNELS)[number];

/**
 * What put an entry on the list: a provider's event (its provider, event type, id and the
 * notification it was about, when it names one), an inbound message (a STOP), or a caller (the
 * key that added it, and its note).
 */
export interface SuppressionSource {
  provider?: string;
  event?: string;
  event_id?: string;
  notification_id?: string;
  key_id?: string;
  note?: string;
}

/**
 * Addresses nothing is sent to on a channel: one row per (channel, address, client). The address
 * is kept normalised (an email lower-cased, a phone number in E.164), as routing and the workers
 * compare it. `client_id` is '' for an entry that holds for every client: what a provider reports
 * (a hard bounce, a spam complaint, a carrier's opt-out) is about an address and the sending
 * domain or number every client shares. An entry a client adds itself holds for that client only.
 * The first entry for an address is kept: its reason and source say why it was first suppressed.
 */
export const suppressions = pgTable(
  "suppressions",
  {
    channel: text("channel").notNull(),
    address: text("address").notNull(),
    clientId: text("client_id").notNull().default(""),
    reason: text("reason").notNull(),
    source: jsonb("source").$type<SuppressionSource>().notNull().default({}),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ name: "suppressions_pkey", columns: [t.channel, t.address, t.clientId] }),
    index("suppressions_client_created_idx").on(t.clientId, t.createdAt, t.channel, t.address),
    // The operator's list of every client's entries, newest first.
    index("suppressions_created_idx").on(t.createdAt, t.channel, t.address, t.clientId),
    check("suppressions_channel_check", sql`${t.channel} in ('email', 'sms')`),
    check(
      "suppressions_reason_check",
      sql`${t.reason} in ('hard_bounce', 'spam_complaint', 'unsubscribe', 'carrier_opt_out', 'manual')`,
    ),
  ],
);
