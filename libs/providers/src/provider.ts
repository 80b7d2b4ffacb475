import type { Channel, ProviderAnswer } from "@notify/core";

/** A message ready for a provider: rendered, addressed, tagged for receipt matching. */
export interface OutboundMessage {
  notificationId: string;
  channel: Channel;
  /** Email address, E.164 phone number, JSON push subscription, or user id for in-app. */
  to: string;
  subject: string | null;
  body: string;
  category: string;
  priority: "transactional" | "promotional";
  /**
   * The notification's deliver-by deadline (ISO 8601), when it has one: a provider that can
   * tell its network to drop the message past it (a push TTL, an SMS validity period) does.
   */
  deliverBy?: string | null;
  /**
   * Email only: header fields the message carries besides the provider's own (the
   * List-Unsubscribe pair). Names and values are ours, never a template's.
   */
  headers?: Readonly<Record<string, string>>;
}

export interface Provider {
  /** Stable provider name, e.g. "sendgrid"; stored with provider ids for receipt matching. */
  readonly name: string;
  readonly channel: Channel;
  /**
   * A send repeated for the same notification has no further effect (our own inbox stores one
   * item per notification): a send whose outcome is unknown is made again instead of unsettled.
   */
  readonly idempotent?: boolean;
  /** One call, its outcome classified by the provider itself (libs/core's delivery policy says what each means). */
  send(message: OutboundMessage): Promise<ProviderAnswer>;
  /**
   * Releases what the provider keeps open between sends (the SMTP provider's pooled
   * connections), so a stopping process is not held up by idle sockets; providers that keep
   * nothing open have none. No send may follow it.
   */
  close?(): Promise<void>;
}
