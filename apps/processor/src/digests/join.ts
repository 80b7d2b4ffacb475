import { type LaneMessage, parseDuration } from "@notify/core";
import { joinDigest } from "@notify/db";
import type { RouteDeps } from "../routing/plan.js";

/**
 * Routes a digest's item: it joins the open digest of its client, user, template and key (one
 * is opened with a window from now when none is), and nothing else happens to it now. The
 * digest is sent as one notification when its window ends or it fills up (send.ts), routed then
 * like any other: preferences and quiet hours apply to it as a whole, at that time. A redelivered
 * item is answered "duplicate" and joins nothing twice.
 */
export async function joinDigestItem(
  deps: Pick<RouteDeps, "database" | "now" | "log">,
  message: LaneMessage,
): Promise<"routed" | "duplicate"> {
  const digest = message.digest;
  if (!digest) throw new Error(`notification ${message.notification_id} names no digest`);
  const windowMs = parseDuration(digest.window);
  if (windowMs === null) throw new Error(`notification ${message.notification_id}: bad digest window ${digest.window}`);
  const { digestId, joined } = await joinDigest(deps.database, {
    notificationId: message.notification_id,
    clientId: message.client_id,
    userId: message.user_id,
    templateId: message.template_id,
    key: digest.key,
    windowMs,
    maxItems: digest.max_items,
    now: deps.now(),
  });
  if (deps.log.isLevelEnabled("debug"))
    deps.log.debug({ notification_id: message.notification_id, digest_id: digestId, joined }, "joined a digest");
  return joined ? "routed" : "duplicate";
}
