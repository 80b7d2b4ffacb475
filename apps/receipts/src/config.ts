import { adminServer, common, httpServer, int, optionalUrl, port, preauthThrottle, text } from "@notify/config";
import { sendgridPublicKey } from "@notify/providers";
import * as v from "valibot";

const secret = () => v.optional(v.pipe(v.string(), v.minLength(1, "must not be empty")));

export const ReceiptsConfig = v.object({
  ...common,
  /** Port the provider webhooks (SendGrid events, Plivo reports) post to. */
  PORT: port(3003),
  ...adminServer(3103),
  HOST: text("0.0.0.0"),
  ...httpServer(),
  ...preauthThrottle(),
  DB_POOL_SIZE: int(5, 1, 100),
  /**
   * The origin providers call, when it is not the one requests arrive on (a proxy, a tunnel):
   * Plivo signs the URL it called.
   */
  PUBLIC_BASE_URL: optionalUrl(),
  /**
   * Verifies Plivo's signatures (delivery reports, inbound messages). Unset: /webhooks/plivo and
   * /webhooks/plivo/inbound are not served. Secret.
   */
  PLIVO_AUTH_TOKEN: secret(),
  /**
   * The reply to an SMS opt-out keyword (STOP, UNSUBSCRIBE, ...) sent to a Plivo number, e.g.
   * "You are unsubscribed and will receive no more messages. Reply START to resubscribe.".
   * Carriers expect one confirmation; leave it empty when Plivo (or the carrier) already sends
   * it for the number. Empty: no reply.
   */
  RECEIPTS_SMS_OPT_OUT_REPLY: v.optional(v.pipe(v.string(), v.maxLength(1600, "must be at most 1600 characters")), ""),
  /** The reply to an SMS opt-in keyword (START, UNSTOP, YES, OPTIN). Empty: no reply. */
  RECEIPTS_SMS_OPT_IN_REPLY: v.optional(v.pipe(v.string(), v.maxLength(1600, "must be at most 1600 characters")), ""),
  /**
   * SendGrid's Event Webhook verification key (Settings → Mail Settings → Event Webhook →
   * Signed Event Webhook): base64 DER or PEM. Unset: /webhooks/sendgrid is not served.
   */
  SENDGRID_WEBHOOK_PUBLIC_KEY: v.optional(
    v.pipe(
      v.string(),
      v.check((key) => {
        try {
          sendgridPublicKey(key);
          return true;
        } catch {
          return false;
        }
      }, "must be an EC P-256 public key (base64 DER or PEM)"),
    ),
  ),
  /**
   * Largest SendGrid Event Webhook post, in bytes (413 beyond, judged from Content-Length before
   * anything is read). SendGrid posts a batch within about 30 seconds or once it reaches 768 KB;
   * 1 MiB leaves room above that. Raise it only if SendGrid documents larger batches.
   */
  RECEIPTS_SENDGRID_MAX_BODY_BYTES: int(1_048_576, 65_536, 16_777_216),
  /**
   * Largest Plivo delivery report, in bytes (413 beyond). A report is one message status, about
   * two dozen short form fields (well under 2 KB); 16 KiB leaves room for fields Plivo adds.
   */
  RECEIPTS_PLIVO_MAX_BODY_BYTES: int(16_384, 4096, 1_048_576),
  /**
   * Webhook bodies read at once, by this process, before their signature is checked: beyond it
   * a post is answered 503 with Retry-After before anything of it is read (the provider
   * retries). Bounds what unauthenticated posts can hold in memory to this many times the
   * provider's body limit; SendGrid posts from several servers at once, so keep it well above
   * the posts that arrive in parallel.
   */
  RECEIPTS_MAX_UNVERIFIED_READS: int(32, 1, 10_000),
  /**
   * Of RECEIPTS_MAX_UNVERIFIED_READS, the reads for source addresses that have spent their
   * failed-attempt budget (PREAUTH_BURST), all such addresses together. A provider's shared
   * address spends it whenever someone points their own account at this URL; its genuine posts
   * still get through this lane, and a post beyond it is answered 429 with Retry-After. 0: such
   * an address gets 429 until its budget refills.
   */
  RECEIPTS_MAX_OVER_BUDGET_READS: int(2, 0, 10_000),
  /**
   * Of RECEIPTS_MAX_UNVERIFIED_READS, the reads one source address (an IPv6 address: its /64)
   * holds at once; a post beyond it is answered 429 with Retry-After before anything of it is
   * read, and of the over-budget reads an address holds one. Without it, one address sending
   * bodies slowly holds every read, and every provider's signed post gets 503. A provider's
   * address has its few posts in flight and retries a 429; keep it well below the process-wide
   * reads. Behind a proxy, set TRUSTED_PROXIES, or every post counts as the proxy's.
   */
  RECEIPTS_MAX_UNVERIFIED_READS_PER_ADDRESS: int(4, 1, 10_000),
  /**
   * How long a webhook body has to arrive whole once its read is admitted, in ms: one still
   * arriving then is answered 408, its connection closed and its read freed, and the attempt it
   * reserved stays spent. Shorter than HTTP_REQUEST_TIMEOUT_MS, so a slow body holds a read for
   * this long rather than the whole request timeout; a provider sends its post within
   * milliseconds, and a 1 MiB SendGrid batch arrives within it above about 100 KB/s.
   */
  RECEIPTS_UNVERIFIED_READ_TIMEOUT_MS: int(10_000, 1000, 3_600_000),
  /** How often receipts that arrived before their send was recorded are retried. */
  RECEIPT_SWEEP_INTERVAL_MS: int(1000, 50, 600_000),
  /**
   * Oldest signed timestamp (X-Twilio-Email-Event-Webhook-Timestamp) a SendGrid post may carry,
   * in seconds: an older one is refused (401) as a replay. SendGrid signs each try anew.
   */
  RECEIPTS_MAX_AGE_SECONDS: int(600, 30, 86_400),
  /** How far ahead of this clock a SendGrid post's signed timestamp may be (clock skew), in seconds. */
  RECEIPTS_MAX_FUTURE_SECONDS: int(60, 0, 3600),
  /**
   * How long a receipt that never matched a send (no channel with its provider id, none bound by
   * its notification id) is kept for the sweep, in hours; then it is deleted.
   */
  RECEIPTS_UNMATCHED_RETENTION_HOURS: int(72, 1, 8760),
});
export type ReceiptsConfig = v.InferOutput<typeof ReceiptsConfig>;
