import type { Channel, LaneMessage, Priority } from "@notify/core";
import type { RowPick } from "../rows.js";
import type { notifications } from "../schema/index.js";

/** The columns of a notification its lane message is made of. */
export type LaneRow = Omit<
  RowPick<
    typeof notifications,
    | "id"
    | "client_id"
    | "user_id"
    | "category"
    | "template_id"
    | "template_version"
    | "priority"
    | "requested_channels"
    | "data"
    | "partition"
    | "created_at"
    | "deliver_by"
    | "send_at"
    | "digest"
    | "throttle"
    | "digest_of"
    | "trace_parent"
  >,
  "priority" | "requested_channels" | "data"
> & { priority: Priority; requested_channels: Channel[] | null; data: Record<string, unknown> };

/** A notification as its lane message, with the partition it is published to. */
export interface LaneNotification {
  message: LaneMessage;
  partition: number;
  createdAt: Date;
  /** W3C traceparent of the ingest request's span, when it was traced: work resumed from the row joins its trace. */
  traceParent: string | null;
}

/** The lane message a stored notification was (or is to be) published as. */
export const asLaneNotification = (row: LaneRow): LaneNotification => ({
  message: {
    notification_id: row.id,
    client_id: row.client_id,
    user_id: row.user_id,
    category: row.category,
    template_id: row.template_id,
    ...(row.template_version === null ? {} : { template_version: row.template_version }),
    priority: row.priority,
    channels: row.requested_channels,
    data: row.data,
    created_at: row.created_at.toISOString(),
    ...(row.deliver_by === null ? {} : { deliver_by: row.deliver_by.toISOString() }),
    ...(row.send_at === null ? {} : { send_at: row.send_at.toISOString() }),
    ...(row.digest == null ? {} : { digest: row.digest }),
    ...(row.throttle == null ? {} : { throttle: row.throttle }),
    ...(row.digest_of == null ? {} : { digest_of: row.digest_of }),
  },
  partition: row.partition,
  createdAt: row.created_at,
  traceParent: row.trace_parent ?? null,
});
