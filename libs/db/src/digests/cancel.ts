import type { Database } from "../pool.js";

/** What a cancel did to a digest's item. */
export type DigestItemCancel = "canceled" | "already_canceled" | "too_late";

/**
 * Cancels a digest's item of this client: while its digest is not sent, the item is marked
 * canceled (left out of the digest, which counts one item fewer) under the digest's row lock,
 * the lock its sending takes, so the two never cross. Null when the notification is no client's
 * digest item.
 */
export async function cancelDigestItem(
  database: Database,
  item: { id: string; clientId: string; at: Date },
): Promise<DigestItemCancel | null> {
  return database.sql.begin(async (tx) => {
    const [row] = await tx<{ digest_id: string; user_id: string; status: string; canceled: boolean }[]>`
      select d.id as digest_id, d.user_id, d.status, i.canceled_at is not null as canceled
      from digest_items i join digests d on d.id = i.digest_id
      where i.notification_id = ${item.id} and d.client_id = ${item.clientId}
      for update of d, i`;
    if (!row) return null;
    if (row.canceled) return "already_canceled";
    if (row.status === "sent") return "too_late";
    await tx`update digest_items set canceled_at = ${item.at} where notification_id = ${item.id}`;
    await tx`update digests set item_count = item_count - 1 where id = ${row.digest_id} and user_id = ${row.user_id}`;
    return "canceled";
  }) as Promise<DigestItemCancel | null>;
}
