import { newId } from "@notify/core";
import type { Database } from "../pool.js";

/** A notification to collect into the open digest of its key. */
export interface DigestJoin {
  notificationId: string;
  clientId: string;
  userId: string;
  templateId: string;
  key: string;
  windowMs: number;
  maxItems: number;
  /** The routing clock: a new digest's window runs from here. */
  now: Date;
}

export interface Joined {
  digestId: string;
  /** False when the notification had joined before (a redelivered lane message). */
  joined: boolean;
}

/** Thrown to roll back a join another transaction made for the same notification meanwhile. */
class AlreadyJoined extends Error {}

/**
 * Puts a notification into the open digest of its (client, user, template, key), opening one
 * whose window runs from `now` when none is open, in one transaction. Each notification joins
 * exactly one digest: its item row's primary key is the notification, and a notification that
 * has joined (a redelivery, the reconciler, a second processor) is answered with its digest and
 * changes nothing. The open digest's row is locked while the item goes in, so a digest being
 * sent (which takes the same lock) never gains an item after it is read, and the partial unique
 * index keeps one open digest per key. The item that fills a digest closes it (due at once); the
 * next item opens a new one. A digest is never opened without its first item.
 */
export async function joinDigest(database: Database, join: DigestJoin): Promise<Joined> {
  const earlier = await joinedDigest(database, join.notificationId);
  if (earlier !== null) return { digestId: earlier, joined: false };
  try {
    return await database.sql.begin(async (tx) => {
      // Each try that finds no open digest it can lock follows another joiner's commit (one that
      // opened or filled the digest), so tries are bounded by the joiners of one key at once:
      // a dozen concurrent items can take more than five.
      for (let attempt = 0; attempt < 64; attempt++) {
        const [open] = await tx<{ id: string }[]>`
          select id from digests
          where client_id = ${join.clientId} and user_id = ${join.userId} and template_id = ${join.templateId}
            and key = ${join.key} and status = 'open'
          for update`;
        let digestId = open?.id;
        if (digestId === undefined) {
          const [opened] = await tx<{ id: string }[]>`
            insert into digests (id, client_id, user_id, template_id, key, status, max_items, opened_at, closes_at)
            values (${newId()}, ${join.clientId}, ${join.userId}, ${join.templateId}, ${join.key}, 'open', ${join.maxItems},
                    ${join.now}, ${new Date(join.now.getTime() + join.windowMs)})
            on conflict (client_id, user_id, template_id, key) where status = 'open' do nothing
            returning id`;
          // Another transaction opened it first: lock that one.
          if (!opened) continue;
          digestId = opened.id;
        }
        const [item] = await tx`
          insert into digest_items (notification_id, digest_id, joined_at, user_id)
          values (${join.notificationId}, ${digestId}, ${join.now}, ${join.userId})
          on conflict (notification_id) do nothing
          returning notification_id`;
        if (!item) throw new AlreadyJoined();
        await tx`
          update digests set item_count = item_count + 1,
            status = case when item_count + 1 >= max_items then 'closed' else status end,
            closes_at = case when item_count + 1 >= max_items then least(closes_at, ${join.now}) else closes_at end
          where id = ${digestId} and user_id = ${join.userId}`;
        return { digestId, joined: true };
      }
      throw new Error(`no open digest of key ${join.key} could be locked`);
    });
  } catch (error) {
    if (!(error instanceof AlreadyJoined)) throw error;
    const digestId = await joinedDigest(database, join.notificationId);
    if (digestId === null) throw new Error("a digest item vanished");
    return { digestId, joined: false };
  }
}

/** The digest a notification joined, or null. */
export async function joinedDigest(database: Database, notificationId: string): Promise<string | null> {
  const [row] = await database.sql<{ digest_id: string }[]>`
    select digest_id from digest_items where notification_id = ${notificationId}`;
  return row?.digest_id ?? null;
}
