import {
  AppError,
  type Channel,
  type ChannelResult,
  type ChannelStatus,
  type NotificationView,
  notificationStatus,
  type Priority,
} from "@notify/core";
import type { Database } from "@notify/db";
import { asDependencyError } from "../dependency.js";

/**
 * A channel's result plus, non-breaking, when a waiting channel is next due: the planned send
 * time of a deferred channel (quiet hours), null otherwise.
 */
export interface ChannelResultView extends ChannelResult {
  next_attempt_at: string | null;
}
export interface NotificationStatusView extends Omit<NotificationView, "channels"> {
  channels: Partial<Record<Channel, ChannelResultView>>;
}

const WAITING: readonly ChannelStatus[] = ["deferred", "retrying", "parked"];

/** Sets the top-level status from the channels it shows, so the two can never disagree. */
export function withStatus(view: NotificationStatusView): NotificationStatusView {
  view.status = notificationStatus(Object.values(view.channels).map((channel) => channel.status));
  return view;
}

/** GET /api/v1/notifications/{id}: one client never sees another client's notifications. */
export async function getNotification(
  database: Database,
  clientId: string,
  id: string,
): Promise<NotificationStatusView> {
  let rows: Array<{
    id: string;
    user_id: string;
    category: string;
    template_id: string;
    priority: Priority;
    created_at: Date;
    channel: Channel | null;
    status: ChannelStatus | null;
    provider_id: string | null;
    reason: string | null;
    updated_at: Date | null;
    next_attempt_at: Date | null;
  }>;
  try {
    rows = await database.sql`
      select n.id, n.user_id, n.category, n.template_id, n.priority, n.created_at,
             c.channel, c.status, c.provider_id, c.reason, c.updated_at, c.next_attempt_at
      from notifications n left join notification_channels c on c.notification_id = n.id
      where n.id = ${id} and n.client_id = ${clientId}`;
  } catch (error) {
    throw asDependencyError(error, "postgres");
  }
  const first = rows[0];
  if (!first) throw new AppError("not_found", `notification ${id} does not exist`);
  const view: NotificationStatusView = {
    notification_id: first.id,
    user_id: first.user_id,
    category: first.category,
    template_id: first.template_id,
    priority: first.priority,
    status: "accepted",
    created_at: first.created_at.toISOString(),
    channels: {},
  };
  for (const row of rows) {
    if (row.channel === null || row.status === null || row.updated_at === null) continue;
    view.channels[row.channel] = {
      status: row.status,
      provider_id: row.provider_id,
      reason: row.reason,
      ts: row.updated_at.toISOString(),
      next_attempt_at: row.next_attempt_at && WAITING.includes(row.status) ? row.next_attempt_at.toISOString() : null,
    };
  }
  return withStatus(view);
}
