import type { DeadLetterAttempt, DeadLetterNotification } from "@notify/core";
import type { ChannelRef } from "../channel-ref.js";
import type { Sql } from "../pool.js";

/**
 * What a dead letter carries besides the item: the original request from the notification log
 * (null when it is gone) and every attempt of the channel, oldest first.
 */
export async function readDeliveryHistory(
  sql: Sql,
  ref: ChannelRef,
): Promise<{ notification: DeadLetterNotification | null; history: DeadLetterAttempt[] }> {
  const [notification] = await sql<DeadLetterNotification[]>`
    select id as notification_id, client_id, user_id, category, template_id, template_version, priority,
      requested_channels, data, dedup_key, created_at
    from notifications where id = ${ref.notification_id}`;
  const history = await sql<DeadLetterAttempt[]>`
    select attempt, outcome, provider, provider_id, error, at from delivery_attempts
    where notification_id = ${ref.notification_id} and channel = ${ref.channel} order by attempt`;
  return { notification: notification ?? null, history: [...history] };
}
