import type { AppliedReceipt, RecordOptions } from "@notify/db";
import { activeLink, contextOf, SpanKind, tracingOn, withSpan } from "@notify/telemetry";

interface DebugLog {
  debug(obj: unknown, msg?: string): void;
}

/**
 * With tracing on, the options that give each receipt a webhook applied a `receipt apply` span
 * in its notification's trace (the child of the ingest request's span stored with it, linked to
 * the webhook request that carried it), from when the post began to be stored until it was;
 * the line logged for it carries that trace id. Undefined with tracing off: recordReceipts then
 * reads nothing more.
 */
export function receiptTracing(log: DebugLog): RecordOptions | undefined {
  if (!tracingOn()) return undefined;
  const startTime = Date.now();
  const links = activeLink();
  return {
    onApplied(applied: AppliedReceipt[]) {
      for (const r of applied) {
        const traced = r.traceParent !== null;
        void withSpan(
          "receipt apply",
          {
            kind: SpanKind.INTERNAL,
            startTime,
            // A notification stored untraced: the span stays in the webhook request's trace.
            ...(traced ? { parent: contextOf(r.traceParent) } : {}),
            ...(traced && links !== undefined ? { links } : {}),
            attributes: {
              "notify.provider": r.provider,
              "notify.event_id": r.eventId,
              "notify.provider_id": r.providerId,
              "notify.status": r.status ?? "none",
              "notify.notification_id": r.notificationId,
              "notify.channel": r.channel,
            },
          },
          async () =>
            log.debug(
              {
                notification_id: r.notificationId,
                channel: r.channel,
                provider: r.provider,
                event_id: r.eventId,
                status: r.status,
              },
              "receipt applied",
            ),
        );
      }
    },
  };
}
