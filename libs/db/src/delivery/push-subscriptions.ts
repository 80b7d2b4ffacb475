import type { Sql } from "../pool.js";

/**
 * Removes a push subscription the push service reported gone (404/410: RFC 8030) from the
 * user's device tokens, so no later notification is sent to it. The processor's preference
 * cache picks the change up within its TTL. Answers whether a subscription was removed.
 */
export async function removePushSubscription(sql: Sql, userId: string, endpoint: string): Promise<boolean> {
  const rows = await sql`
    update user_preferences set
      device_tokens = coalesce(
        (select jsonb_agg(token) from jsonb_array_elements(device_tokens) token where token->>'endpoint' <> ${endpoint}),
        '[]'::jsonb),
      updated_at = now()
    where user_id = ${userId} and device_tokens @> ${sql.json([{ endpoint }])}`;
  return rows.count > 0;
}
