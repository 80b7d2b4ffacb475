import { AppError, type Channel, type NotificationView, notificationStatus } from "@notify/core";
import {
  type ChannelResultView,
  type Database,
  type NotificationRecord,
  readNotification,
  readNotificationTimeline,
  type TimelineEntry,
} from "@notify/db";
import { asDependencyError } from "../dependency.js";

export type { ChannelResultView };
export interface NotificationStatusView extends Omit<NotificationView, "channels"> {
  deliver_by: string | null;
  channels: Partial<Record<Channel, ChannelResultView>>;
}

/** A switch of provider between two attempts of one channel (email failing over, and back). */
export interface ProviderSwitch {
  event: "provider_switch";
  at: string;
  channel: Channel;
  from: string;
  to: string;
}

export type TimelineView = TimelineEntry | ProviderSwitch;

/** One notification as GET /notifications/{id} shows it: its channels and its history. */
export interface NotificationDetailView extends NotificationStatusView {
  timeline: TimelineView[];
}

/** Sets the top-level status from the channels it shows, so the two can never disagree. */
export function withStatus(record: NotificationRecord): NotificationStatusView {
  return {
    notification_id: record.notification_id,
    user_id: record.user_id,
    category: record.category,
    template_id: record.template_id,
    priority: record.priority,
    status: notificationStatus(
      Object.values(record.channels).map((channel) => channel.status),
      { fallbackPending: record.fallback_pending },
    ),
    created_at: record.created_at,
    deliver_by: record.deliver_by,
    channels: record.channels,
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

/** GET /api/v1/notifications/{id}: one client never sees another client's notifications. */
export async function getNotification(
  database: Database,
  clientId: string,
  id: string,
): Promise<NotificationDetailView> {
  let record: NotificationRecord | null;
  let timeline: TimelineEntry[] = [];
  try {
    record = await readNotification(database, clientId, id);
    // Only once it is known to be this client's.
    if (record) timeline = await readNotificationTimeline(database, id);
  } catch (error) {
    throw asDependencyError(error, "postgres");
  }
  if (!record) throw new AppError("not_found", `notification ${id} does not exist`);
  return { ...withStatus(record), timeline: withProviderSwitches(timeline) };
}
