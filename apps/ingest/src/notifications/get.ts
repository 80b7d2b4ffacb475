import { AppError, type Channel, type NotificationView, notificationStatus } from "@notify/core";
import { type ChannelResultView, type Database, type NotificationRecord, readNotification } from "@notify/db";
import { asDependencyError } from "../dependency.js";

export type { ChannelResultView };
export interface NotificationStatusView extends Omit<NotificationView, "channels"> {
  channels: Partial<Record<Channel, ChannelResultView>>;
}

/** Sets the top-level status from the channels it shows, so the two can never disagree. */
export function withStatus(record: NotificationRecord): NotificationStatusView {
  return {
    notification_id: record.notification_id,
    user_id: record.user_id,
    category: record.category,
    template_id: record.template_id,
    priority: record.priority,
    status: notificationStatus(Object.values(record.channels).map((channel) => channel.status)),
    created_at: record.created_at,
    channels: record.channels,
  };
}

/** GET /api/v1/notifications/{id}: one client never sees another client's notifications. */
export async function getNotification(
  database: Database,
  clientId: string,
  id: string,
): Promise<NotificationStatusView> {
  let record: NotificationRecord | null;
  try {
    record = await readNotification(database, clientId, id);
  } catch (error) {
    throw asDependencyError(error, "postgres");
  }
  if (!record) throw new AppError("not_found", `notification ${id} does not exist`);
  return withStatus(record);
}
