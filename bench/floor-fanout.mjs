// The least a durable broadcast expansion does, as the reference of bench/fanout.mjs: read the
// next members of the audience in user id order, insert their notifications and recipient rows
// in one statement, publish one acknowledged lane message per recipient (msg id set, for
// deduplication), and go on from the last user id. No broadcast row, no outbox, no cancel
// check, no leader, no pipelining: what is left is the cost of the durable work itself.
import { newId, partitionOf } from "@notify/core";

/** Expands `audienceId` into `broadcastId`'s notifications, `batch` members at a time. */
export async function floorExpand({ sql, bus }, { audienceId, broadcastId, batch }) {
  const partitions = bus.naming.partitions;
  const subjects = Array.from({ length: partitions }, (_, p) => bus.subjects.lane("promotional", p));
  let cursor = "";
  for (;;) {
    const members = await sql`
      select user_id from audience_members where audience_id = ${audienceId} and user_id > ${cursor}
      order by user_id limit ${batch}`;
    if (members.length === 0) return;
    const users = members.map((m) => m.user_id);
    const ids = users.map(() => newId());
    const parts = users.map((u) => partitionOf(u, partitions));
    const [{ created_at }] = await sql`
      with batch as (select * from unnest(${ids}::text[], ${users}::text[], ${parts}::int[]) as t(id, user_id, partition)),
      inserted as (
        insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key,
          request_hash, partition)
        select id, 'bench', user_id, 'deals', 'promo', 'promotional', '{"name":"you"}',
          ${`broadcast:${broadcastId}:`} || user_id, 'h', partition from batch
      ),
      recipients as (insert into broadcast_recipients (broadcast_id, user_id, notification_id)
        select ${broadcastId}, user_id, id from batch)
      select now() as created_at`;
    const at = created_at.toISOString();
    await Promise.all(
      users.map((user, i) =>
        bus.publish(
          subjects[parts[i]],
          {
            notification_id: ids[i],
            client_id: "bench",
            user_id: user,
            category: "deals",
            template_id: "promo",
            priority: "promotional",
            channels: null,
            data: { name: "you" },
            created_at: at,
          },
          ids[i],
        ),
      ),
    );
    cursor = users.at(-1);
  }
}
