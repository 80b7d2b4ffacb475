import { NotificationRequest } from "@notify/core";
import * as v from "valibot";

const { category, template_id, data, channels } = NotificationRequest.entries;

/** Body of POST /api/v1/broadcasts: a notification for an audience instead of a user; always promotional. */
export const BroadcastRequest = v.strictObject({
  audience_id: v.pipe(
    v.string("audience_id must be a string"),
    v.minLength(1, "audience_id must not be empty"),
    v.maxLength(256, "audience_id must be at most 256 characters"),
  ),
  category,
  template_id,
  data,
  channels,
});
export type BroadcastRequest = v.InferOutput<typeof BroadcastRequest>;

/** expanding → expanded, or cancelled; expanding ⇄ paused (no batch is taken while paused); paused → cancelled. */
export const BROADCAST_STATUSES = ["expanding", "paused", "expanded", "cancelled"] as const;

export const BroadcastView = v.object({
  broadcast_id: v.string(),
  audience_id: v.string(),
  status: v.picklist(BROADCAST_STATUSES),
  category: v.string(),
  template_id: v.string(),
  /** Audience members when the broadcast was accepted. */
  total: v.number(),
  /** Recipients given their notification so far. */
  expanded: v.number(),
  /** Recipients whose every channel was suppressed by their preferences. */
  suppressed: v.number(),
  /** Recipients delivered on at least one channel. */
  delivered: v.number(),
  /** Recipients not delivered anywhere with at least one failed, bounced or expired channel. */
  failed: v.number(),
  counted_at: v.pipe(
    v.string(),
    v.metadata({
      description:
        "When suppressed, delivered and failed were counted: a count is made again once it is ten times as old as it took to make (seconds for a million recipients)",
    }),
  ),
  created_at: v.string(),
  finished_at: v.nullable(v.string()),
});
export type BroadcastView = v.InferOutput<typeof BroadcastView>;

export const BroadcastAccepted = v.object({
  broadcast_id: v.string(),
  status: v.picklist(BROADCAST_STATUSES),
  total: v.number(),
});
