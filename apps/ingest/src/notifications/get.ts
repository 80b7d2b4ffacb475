import {
  AppError,
  type Channel,
  type NotificationView,
  notificationStatus,
  type SendAtLocal,
  traceIdOf,
} from "@notify/core";
import {
  type ChannelResultView,
  type Database,
  type NotificationDigest,
  type NotificationRecord,
  readNotification,
  readNotificationTimeline,
  type TimelineEntry,
} from "@notify/db";
import { toAppError } from "@notify/http";

export interface NotificationStatusView extends Omit<NotificationView, "channels"> {
  deliver_by: string | null;
  send_at: string | null;
  send_at_local: SendAtLocal | null;
  /** The digest it joined (an item) or sends; null: neither. */
  digest: Omit<NotificationDigest, "statuses"> | null;
  channels: Partial<Record<Channel, ChannelResultView>>;
  /** The trace its ingest request started (32 hex), from the stored traceparent; null without tracing. */
  trace_id: string | null;
}

/** A switch of provider between two attempts of one channel (email failing over, and back). */
export interface ProviderSwitch {
  event: "provider_switch";
  at: string;
  channel: Channel;
  from: string;
  to: string;
}

/** The first entry of every history: when the notification was accepted (its created_at). */
export interface AcceptedEntry {
  event: "accepted";
  at: string;
}

export type TimelineView = AcceptedEntry | TimelineEntry | ProviderSwitch;

/** One notification as GET /notifications/{id} shows it: its channels and its history. */
export interface NotificationDetailView extends NotificationStatusView {
  timeline: TimelineView[];
}

/** Sets the top-level status from the channels it shows, so the two can never disagree. */
export function withStatus(record: NotificationRecord): NotificationStatusView {
  const { statuses, ...digest } = record.digest ?? { statuses: [] };
  // A digest's item has no channels of its own: it stands as its digest's notification does,
  // and is processing until that one has an outcome.
  const item = record.digest?.role === "item";
  return {
    notification_id: record.notification_id,
    user_id: record.user_id,
    category: record.category,
    template_id: record.template_id,
    priority: record.priority,
    status: record.digest?.canceled
      ? "canceled"
      : item && statuses.length === 0
        ? "processing"
        : notificationStatus(item ? statuses : Object.values(record.channels).map((channel) => channel.status), {
            fallbackPending: record.fallback_pending,
          }),
    created_at: record.created_at,
    deliver_by: record.deliver_by,
    send_at: record.send_at,
    send_at_local: record.send_at_local,
    digest: record.digest ? (digest as Omit<NotificationDigest, "statuses">) : null,
    channels: record.channels,
    trace_id: traceIdOf(record.trace_parent),
  };
}

/** The history with a provider_switch entry before each attempt made with another provider than the channel's last. */
export function withProviderSwitches(entries: readonly TimelineEntry[]): TimelineView[] {
  const last = new Map<Channel, string>();
  const out: TimelineView[] = [];
  for (const entry of entries) {
    if (entry.event === "attempt" && entry.provider !== null) {
      const before = last.get(entry.channel);
      if (before !== undefined && before !== entry.provider)
        out.push({ event: "provider_switch", at: entry.at, channel: entry.channel, from: before, to: entry.provider });
      last.set(entry.channel, entry.provider);
    }
    out.push(entry);
  }
  return out;
}

/**
 * A notification with its history, the client's own (`clientId`), or any client's (null: the
 * operator's GET /api/v1/ops/notifications/{id}, which shows whose it is).
 */
async function readDetail(
  database: Database,
  clientId: string | null,
  id: string,
): Promise<{ record: NotificationRecord; view: NotificationDetailView }> {
  let record: NotificationRecord | null;
  let timeline: TimelineEntry[] = [];
  try {
    record = await readNotification(database, clientId, id);
    // Only once it is known to be this client's.
    if (record) timeline = await readNotificationTimeline(database, id);
  } catch (error) {
    throw toAppError(error);
  }
  if (!record) throw new AppError("not_found", `notification ${id} does not exist`);
  const accepted: AcceptedEntry = { event: "accepted", at: record.created_at };
  return { record, view: { ...withStatus(record), timeline: [accepted, ...withProviderSwitches(timeline)] } };
}

/** GET /api/v1/notifications/{id}: one client never sees another client's notifications. */
export async function getNotification(
  database: Database,
  clientId: string,
  id: string,
): Promise<NotificationDetailView> {
  return (await readDetail(database, clientId, id)).view;
}

/** GET /api/v1/ops/notifications/{id}: any client's notification, as its client sees it, and whose it is. */
export async function getAnyNotification(
  database: Database,
  id: string,
): Promise<NotificationDetailView & { client_id: string }> {
  const { record, view } = await readDetail(database, null, id);
  return { ...view, client_id: record.client_id };
}
