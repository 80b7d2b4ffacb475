import type { Database } from "../pool.js";

/**
 * One archived notification, one NDJSON line: the row and everything that hangs off it, each
 * as Postgres' own JSON of the row (`to_json`), so a restore maps it back with
 * jsonb_populate_record and nothing is lost, timestamps to the microsecond included.
 */
export interface ArchiveRecord {
  version: 1;
  notification: { id: string; user_id: string; created_at: string } & Record<string, unknown>;
  channels: Record<string, unknown>[];
  status_events: Record<string, unknown>[];
  attempts: Record<string, unknown>[];
  /** The channel fallback chain (absent from a record archived without one). */
  fallbacks?: Record<string, unknown>[];
  /** The provider receipts that name the notification (absent from a record archived without them). */
  receipts?: Record<string, unknown>[];
  /** Its in-app copy as the user saw it and left it (seen, read, archived); null when it had none. */
  inbox_item?: Record<string, unknown> | null;
}

/** A notification on its way out of the live log: its id, its created_at (ISO 8601, UTC, to the microsecond), its ArchiveRecord as text. */
export interface ArchiveLine {
  id: string;
  created_at: string;
  line: string;
}

/**
 * Takes one batch of notifications older than `days` out of the live log: selects them (their
 * channels, history, attempts, fallback chain, receipts and inbox item as one ArchiveRecord
 * each; their broadcast recipient row is deleted, not archived), hands them to
 * `keep`, and deletes them and what hangs off them in the same short transaction, so
 * whatever `keep` wrote exists before the rows are gone. SKIP LOCKED and a bounded batch keep it
 * from blocking ingest or another archiver; the oldest go first. A notification still waiting in
 * the publish outbox, with a channel still deferred, or in a digest not sent yet, stays: work
 * still to do is never archived.
 * Answers how many were taken.
 */
export async function takeArchiveBatch(
  database: Database,
  options: { days: number; batchSize: number },
  keep: (rows: ArchiveLine[]) => Promise<void>,
): Promise<number> {
  return database.sql.begin(async (tx) => {
    // Receipts that name no notification (the default partition's null key) are in no one's
    // history and retire with no day: the applied ones past the window go here, a batch at a
    // time (the unapplied ones sooner, purgeUnmatchedReceipts). In key order, without a row lock
    // of their own (the processor may delete receipts, not update them): two archivers at once
    // take the same rows in the same order, and the second deletes what the first left.
    await tx`
      delete from provider_receipts r
      using (
        select event_id, provider from provider_receipts
        where notification_id is null and received_at < now() - make_interval(days => ${options.days})
        order by event_id, provider
        limit ${options.batchSize}
      ) due
      where r.notification_id is null and r.event_id = due.event_id and r.provider = due.provider`;
    const rows = await tx<ArchiveLine[]>`
      select n.id, to_char(n.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_at,
        json_build_object(
          'version', 1,
          'notification', to_json(n),
          'channels', (select coalesce(json_agg(c), '[]') from notification_channels c where c.notification_id = n.id),
          'status_events', (select coalesce(json_agg(e order by e.id), '[]') from channel_status_events e where e.notification_id = n.id),
          'attempts', (select coalesce(json_agg(a), '[]') from delivery_attempts a where a.notification_id = n.id),
          'fallbacks', (select coalesce(json_agg(f), '[]') from notification_fallbacks f where f.notification_id = n.id),
          'receipts', (select coalesce(json_agg(r order by r.received_at, r.event_id), '[]') from provider_receipts r
                       where r.notification_id = n.id),
          'inbox_item', (select to_json(i) from inbox_items i where i.notification_id = n.id)
        )::text as line
      from notifications n
      where n.created_at < now() - make_interval(days => ${options.days})
        -- Row by row only in the default partition (rows kept past their range's retirement, ids
        -- of another shape) and the first partition (the rows from before the log was
        -- partitioned, until that partition is retired whole): every other range goes at once.
        and n.tableoid = any(array[to_regclass('notifications_default'), to_regclass('notifications_p0')]::oid[])
        and not exists (select 1 from publish_outbox o where n.id = any(o.notification_ids))
        and not exists (select 1 from deferred_notifications d where d.notification_id = n.id)
        -- An item of a digest not sent yet: the digest's notification reads its data when sent.
        and not exists (select 1 from digest_items i join digests d on d.id = i.digest_id
                        where i.notification_id = n.id and d.status <> 'sent')
      -- Oldest first, through notifications_created_idx: unordered, the planner expects old rows
      -- anywhere and scans the log from its start, through every newer row on the way.
      order by n.created_at
      limit ${options.batchSize}
      for update of n skip locked`;
    if (rows.length === 0) return 0;
    await keep(rows);
    // The log's tables have no foreign keys to cascade along: each goes by its notification id.
    const ids = rows.map((r) => r.id);
    await tx`delete from notification_channels where notification_id = any(${ids}::text[])`;
    await tx`delete from channel_status_events where notification_id = any(${ids}::text[])`;
    await tx`delete from delivery_attempts where notification_id = any(${ids}::text[])`;
    await tx`delete from notification_fallbacks where notification_id = any(${ids}::text[])`;
    await tx`delete from digest_items where notification_id = any(${ids}::text[])`;
    await tx`delete from provider_receipts where notification_id = any(${ids}::text[])`;
    await tx`delete from inbox_items where notification_id = any(${ids}::text[])`;
    await tx`delete from broadcast_recipients where notification_id = any(${ids}::text[])`;
    await tx`delete from notifications where id = any(${ids}::text[])`;
    return rows.length;
  });
}

/**
 * Puts one archived notification back into the live log with its channels, history, attempts,
 * fallback chain, receipts and inbox item, in one transaction. A notification already live is
 * left alone (false), so a restore can be repeated. A row archived without its user (written
 * before migration 0029) is restored with the notification's.
 */
export async function restoreArchived(database: Database, record: ArchiveRecord): Promise<boolean> {
  const json = database.sql.json;
  const owned = (rows: Record<string, unknown>[]) =>
    rows.map((row) => ({ ...row, user_id: row.user_id ?? record.notification.user_id }));
  return database.sql.begin(async (tx) => {
    const [inserted] = await tx`insert into notifications
      select * from jsonb_populate_record(null::notifications, ${json(record.notification as never)})
      on conflict do nothing returning id`;
    if (!inserted) return false;
    await tx`insert into notification_channels
      select * from jsonb_populate_recordset(null::notification_channels, ${json(owned(record.channels) as never)})`;
    await tx`insert into channel_status_events
      select * from jsonb_populate_recordset(null::channel_status_events, ${json(owned(record.status_events) as never)})
      on conflict do nothing`;
    await tx`insert into delivery_attempts
      select * from jsonb_populate_recordset(null::delivery_attempts, ${json(owned(record.attempts) as never)})`;
    if (record.fallbacks !== undefined && record.fallbacks.length > 0) {
      await tx`insert into notification_fallbacks
        select * from jsonb_populate_recordset(null::notification_fallbacks, ${json(owned(record.fallbacks) as never)})`;
    }
    if (record.receipts !== undefined && record.receipts.length > 0) {
      await tx`insert into provider_receipts
        select * from jsonb_populate_recordset(null::provider_receipts, ${json(record.receipts as never)})
        on conflict do nothing`;
    }
    if (record.inbox_item !== undefined && record.inbox_item !== null) {
      await tx`insert into inbox_items
        select * from jsonb_populate_record(null::inbox_items, ${json(record.inbox_item as never)})
        on conflict do nothing`;
    }
    return true;
  });
}
