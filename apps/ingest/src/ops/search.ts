import { type Database, searchNotificationRecords } from "@notify/db";
import { toAppError } from "@notify/http";
import { type NotificationStatusView, withStatus } from "../notifications/get.js";
import type { OpsNotificationsQuery } from "./schemas.js";

/**
 * GET /api/v1/ops/notifications: any client's notifications matching every criterion given,
 * newest first, each as its client's GET /notifications/{id} shows it (without the history)
 * and whose it is.
 */
export async function searchNotifications(
  database: Database,
  query: OpsNotificationsQuery,
): Promise<{ data: Array<NotificationStatusView & { client_id: string }> }> {
  try {
    const records = await searchNotificationRecords(database, {
      ...(query.notification_id === undefined ? {} : { notificationId: query.notification_id }),
      ...(query.user_id === undefined ? {} : { userId: query.user_id }),
      ...(query.client_id === undefined ? {} : { clientId: query.client_id }),
      ...(query.idempotency_key === undefined ? {} : { idempotencyKey: query.idempotency_key }),
      limit: query.limit,
    });
    return { data: records.map((record) => ({ ...withStatus(record), client_id: record.client_id })) };
  } catch (error) {
    throw toAppError(error);
  }
}
