import { type Channel, newId, partitionOf, withDeadline } from "@notify/core";
import type { Database } from "./pool.js";
import type { RowPick } from "./rows.js";
import type { broadcasts } from "./schema/index.js";

export interface BroadcastProgress {
  broadcast_id: string;
  /** The client that sent it. */
  client_id: string;
  audience_id: string;
  /** expanding, paused, expanded or cancelled. */
  status: string;
  category: string;
  template_id: string;
  /** Audience members when the broadcast was accepted. */
  total: number;
  /** Recipients given their notification so far. */
  expanded: number;
  /** Recipients whose every channel was suppressed by their preferences. */
  suppressed: number;
  /** Recipients delivered on at least one channel. */
  delivered: number;
  /** Recipients not delivered anywhere with at least one failed, bounced or expired channel. */
  failed: number;
  /** When suppressed, delivered and failed were counted. */
  counted_at: string;
  created_at: string;
  finished_at: string | null;
}

/**
 * A broadcast's progress: its row, and its recipients counted by the best thing that happened
 * to each. With `clientId`, only that client's broadcast is found (the API); without, any (the
 * operator CLI). Null when there is none. The count is the last one kept (broadcast_progress)
 * while it is younger than ten times what it took, else made again: a million recipients take
 * seconds to count, and a broadcast polled without pause then costs a tenth of that time. A read
 * waits at most RECOUNT_WAIT_MS for a new count when it has an old one (counted_at says which).
 */
export async function readBroadcastProgress(
  database: Database,
  id: string,
  clientId?: string,
): Promise<BroadcastProgress | null> {
  const { sql } = database;
  const [row] = await sql<BroadcastRead[]>`${headWithCount(database)}
    where b.id = ${id} ${clientId === undefined ? sql`` : sql`and b.client_id = ${clientId}`}`;
  if (!row) return null;
  return progressOf(row, row.fresh ? (row as Counted) : await recount(database, row.id, row, RECOUNT_WAIT_MS));
}

type BroadcastHead = {
  id: string;
  client_id: string;
  audience_id: string;
  status: string;
  category: string;
  template_id: string;
  total: number;
  expanded: number;
  created_at: Date;
  finished_at: Date | null;
};

/** A kept count. */
type Counted = { delivered: number; failed: number; suppressed: number; counted_at: Date };

/** A broadcast's row with its kept count, if any, and whether that count is fresh. */
type BroadcastRead = BroadcastHead & Partial<Counted> & { fresh: boolean };

const headWithCount = ({ sql }: Database) => sql`
  select b.id, b.client_id, b.audience_id, b.status, b.category, b.template_id, b.total::float8 as total,
    b.expanded::float8 as expanded, b.created_at, b.finished_at,
    p.delivered::float8 as delivered, p.failed::float8 as failed, p.suppressed::float8 as suppressed, p.counted_at,
    coalesce(p.counted_at > clock_timestamp() - p.count_ms * interval '10 ms', false) as fresh
  from broadcasts b left join broadcast_progress p on p.broadcast_id = b.id`;

const hasCount = (row: Partial<Counted>): row is Counted => row.counted_at instanceof Date;

/** How long counting one broadcast's recipients may take: minutes at tens of millions. */
export const COUNT_TIMEOUT_MS = 600_000;

/** The advisory lock class of a broadcast's count (its second key is the broadcast id's hash). */
const COUNT_LOCK = 7266002;

/** Counts in flight in this process, by pool and broadcast. */
const counting = new WeakMap<Database, Map<string, Promise<Counted>>>();

/**
 * Counts a broadcast's recipients and keeps the count. One process counts a broadcast at a time:
 * while another does, a reader that has a count answers with it; one that has none waits for the
 * other's. Within a process, readers of one broadcast share one count, so a crowd of first
 * readers holds one pool connection, not one each. A reader that has a count waits at most
 * `waitMs` for the new one, then answers with its own while the count goes on.
 */
function recount(database: Database, id: string, kept: Partial<Counted>, waitMs: number): Promise<Counted> {
  let mine = counting.get(database);
  if (mine === undefined) {
    mine = new Map();
    counting.set(database, mine);
  }
  const inFlight = mine;
  let count = inFlight.get(id);
  if (count === undefined) {
    count = countAndKeep(database, id, kept).finally(() => inFlight.delete(id));
    // Nobody may be waiting for it any more: its failure is the waiters' to see, if any.
    count.catch(() => {});
    inFlight.set(id, count);
  }
  if (!hasCount(kept)) return count;
  return withDeadline(
    count.catch(() => kept),
    Math.max(0, waitMs),
    kept,
  );
}

async function countAndKeep(database: Database, id: string, kept: Partial<Counted>): Promise<Counted> {
  return database.sql.begin(async (tx) => {
    // Past the pool's statement timeout if need be, the wait for another process's count
    // included: a broadcast too large to count within it would otherwise never have a count, and
    // its first readers elsewhere would fail while it is counted. One process counts a broadcast
    // at a time (the lock below), and readers that have a count do not wait long for it.
    await tx.unsafe(`set local statement_timeout = ${COUNT_TIMEOUT_MS}`);
    const [lock] = await tx<
      { locked: boolean }[]
    >`select pg_try_advisory_xact_lock(${COUNT_LOCK}, hashtext(${id})) as locked`;
    if (!lock?.locked) {
      if (hasCount(kept)) return kept;
      await tx`select pg_advisory_xact_lock(${COUNT_LOCK}, hashtext(${id}))`;
      const [theirs] = await tx<Counted[]>`select delivered::float8 as delivered, failed::float8 as failed,
          suppressed::float8 as suppressed, counted_at
        from broadcast_progress where broadcast_id = ${id}`;
      if (theirs) return theirs;
    }
    const started = performance.now();
    const [counts] = await tx<Omit<Counted, "counted_at">[]>`
      select count(*) filter (where delivered)::float8 as delivered,
             count(*) filter (where not delivered and failed)::float8 as failed,
             count(*) filter (where not delivered and not failed and suppressed)::float8 as suppressed
      from (
        select bool_or(c.status = 'delivered') as delivered,
               bool_or(c.status in ('failed', 'bounced', 'expired')) as failed,
               bool_and(c.status = 'suppressed') as suppressed
        from broadcast_recipients r join notification_channels c on c.notification_id = r.notification_id
        where r.broadcast_id = ${id}
        group by r.notification_id) as recipients`;
    const counted = { delivered: 0, failed: 0, suppressed: 0, ...counts };
    const countMs = Math.ceil(performance.now() - started);
    // counted_at is the transaction's start, before the count's snapshot: what changed after it
    // may be missing from the count, nothing before it is.
    const [stored] = await tx<{ counted_at: Date }[]>`
      insert into broadcast_progress (broadcast_id, delivered, failed, suppressed, counted_at, count_ms)
      values (${id}, ${counted.delivered}, ${counted.failed}, ${counted.suppressed}, now(), ${countMs})
      on conflict (broadcast_id) do update set delivered = excluded.delivered, failed = excluded.failed,
        suppressed = excluded.suppressed, counted_at = excluded.counted_at, count_ms = excluded.count_ms
      returning counted_at`;
    return { ...counted, counted_at: stored?.counted_at ?? new Date() };
  });
}

function progressOf(row: BroadcastHead, counted: Counted): BroadcastProgress {
  return {
    broadcast_id: row.id,
    client_id: row.client_id,
    audience_id: row.audience_id,
    status: row.status,
    category: row.category,
    template_id: row.template_id,
    total: Number(row.total),
    expanded: Number(row.expanded),
    suppressed: Number(counted.suppressed),
    delivered: Number(counted.delivered),
    failed: Number(counted.failed),
    counted_at: counted.counted_at.toISOString(),
    created_at: row.created_at.toISOString(),
    finished_at: row.finished_at?.toISOString() ?? null,
  };
}

// The ingest API's writes: accepting and cancelling broadcasts.

export interface NewBroadcast {
  id: string;
  clientId: string;
  idempotencyKey: string;
  requestHash: string;
  audienceId: string;
  category: string;
  templateId: string;
  templateVersion: number;
  channels: string[] | null;
  data: Record<string, unknown>;
}

export type InsertedBroadcast =
  | { kind: "inserted"; id: string; total: number }
  /** The client already used this Idempotency-Key: the broadcast it created. */
  | { kind: "existing"; id: string; requestHash: string; total: number; status: string }
  | { kind: "no_audience" };

/**
 * Stores a broadcast with its audience's member count as `total`, idempotent per
 * (client, Idempotency-Key) for as long as the broadcast exists: a repeat finds the first.
 */
export async function insertBroadcast(database: Database, input: NewBroadcast): Promise<InsertedBroadcast> {
  const { sql } = database;
  const [inserted] = await sql<{ id: string; total: number }[]>`
    insert into broadcasts (id, client_id, dedup_key, request_hash, audience_id, category, template_id,
      template_version, requested_channels, data, status, total)
    select ${input.id}, ${input.clientId}, ${input.idempotencyKey}, ${input.requestHash}, a.id, ${input.category},
      ${input.templateId}, ${input.templateVersion}, ${input.channels}::text[], ${sql.json(input.data as never)},
      'expanding', a.member_count
    from audiences a where a.id = ${input.audienceId}
    on conflict (client_id, dedup_key) do nothing
    returning id, total::float8 as total`;
  if (inserted) return { kind: "inserted", id: inserted.id, total: Number(inserted.total) };
  const [existing] = await sql<{ id: string; request_hash: string; total: number; status: string }[]>`
    select id, request_hash, total::float8 as total, status from broadcasts
    where client_id = ${input.clientId} and dedup_key = ${input.idempotencyKey}`;
  if (!existing) return { kind: "no_audience" };
  return {
    kind: "existing",
    id: existing.id,
    requestHash: existing.request_hash,
    total: Number(existing.total),
    status: existing.status,
  };
}

/**
 * Stops expanding a client's broadcast (any client's with a null `clientId`: the operator's
 * routes): recipients already expanded keep their notifications. The expander holds the
 * broadcast's row while it writes a batch, so the cancel lands between two batches and the count
 * it leaves is exact. A broadcast expanding or paused is cancelled; any other is left as it is.
 */
export async function cancelBroadcastExpansion(database: Database, clientId: string | null, id: string): Promise<void> {
  await database.sql`update broadcasts set status = 'cancelled', finished_at = now(), updated_at = now()
    where id = ${id} ${clientId === null ? database.sql`` : database.sql`and client_id = ${clientId}`}
      and status in ('expanding', 'paused')`;
}

/**
 * Pauses an expanding broadcast: the expander takes only `expanding` broadcasts, so it takes no
 * further batch of this one; the batch it holds (it locks the row while writing it) finishes
 * first, as this update waits for that lock. The cursor stays where the last batch left it.
 * A broadcast in any other status is left as it is.
 */
export async function pauseBroadcastExpansion(database: Database, clientId: string | null, id: string): Promise<void> {
  await database.sql`update broadcasts set status = 'paused', updated_at = now()
    where id = ${id} ${clientId === null ? database.sql`` : database.sql`and client_id = ${clientId}`}
      and status = 'expanding'`;
}

/** Resumes a paused broadcast: the expander goes on after its stored cursor. Any other is left as it is. */
export async function resumeBroadcastExpansion(database: Database, clientId: string | null, id: string): Promise<void> {
  await database.sql`update broadcasts set status = 'expanding', updated_at = now()
    where id = ${id} ${clientId === null ? database.sql`` : database.sql`and client_id = ${clientId}`}
      and status = 'paused'`;
}

/**
 * Every client's broadcasts, newest first (created_at desc, then id), offset-paged, optionally
 * of one status, each with its progress, and how many there are in all. A page recounts its
 * broadcasts whose count is not fresh for up to LIST_RECOUNT_MS, the least recently counted
 * first; the others show their last count (counted_at says when). One never counted is always
 * counted.
 */
export async function listBroadcastProgress(
  database: Database,
  query: { status?: string; offset: number; limit: number },
): Promise<{ broadcasts: BroadcastProgress[]; total: number }> {
  const { sql } = database;
  const where = query.status === undefined ? sql`` : sql`where b.status = ${query.status}`;
  const rows = await sql<BroadcastRead[]>`${headWithCount(database)} ${where}
    order by b.created_at desc, b.id limit ${query.limit} offset ${query.offset}`;
  const [count] = await sql<{ total: number }[]>`select count(*)::float8 as total from broadcasts b ${where}`;
  const counts = new Map<string, Counted>();
  for (const row of rows) if (row.fresh || hasCount(row)) counts.set(row.id, row as Counted);
  const started = performance.now();
  const stale = rows
    .filter((row) => !row.fresh)
    .sort((a, b) => (a.counted_at?.getTime() ?? 0) - (b.counted_at?.getTime() ?? 0));
  for (const row of stale) {
    const left = LIST_RECOUNT_MS - (performance.now() - started);
    if (hasCount(row) && left <= 0) break;
    // A row with a count waits for its new one only while the page's time lasts, and keeps the
    // count it had should counting fail: one broadcast does not take the page down or hold it.
    // One never counted has nothing else to show.
    counts.set(row.id, await recount(database, row.id, row, left));
  }
  return {
    broadcasts: rows.map((row) => progressOf(row, counts.get(row.id) as Counted)),
    total: Number(count?.total ?? 0),
  };
}

/** How long a page of the broadcast list spends recounting stale counts. */
export const LIST_RECOUNT_MS = 1000;

/** How long a read with a stale count waits for the new one before answering with the stale one. */
export const RECOUNT_WAIT_MS = 1000;

// ---- Expansion: the processor turns an expanding broadcast into notifications, batch by batch.

/** A notification created for one audience member, as the lane message needs it. */
export interface ExpandedRecipient {
  notification_id: string;
  user_id: string;
  /** The lane partition of its user (stored on the notification too). */
  partition: number;
}

/** The broadcast a batch expanded, as its lane messages need it. */
export type ExpandingBroadcast = Omit<
  RowPick<
    typeof broadcasts,
    "id" | "client_id" | "category" | "template_id" | "template_version" | "requested_channels" | "data"
  >,
  "requested_channels" | "data"
> & {
  requested_channels: Channel[] | null;
  data: Record<string, unknown>;
  /** Its recipients' deadline (ISO 8601): the template version's time to live from the broadcast's acceptance; null: none. */
  deliver_by: string | null;
};

export type ExpansionStep =
  | { kind: "idle" }
  | { kind: "finished"; broadcastId: string }
  | {
      kind: "expanded";
      broadcast: ExpandingBroadcast;
      recipients: ExpandedRecipient[];
      /** The batch's notifications' created_at: the transaction's now(), stored on each. */
      createdAt: Date;
      outboxId: string;
    };

type BroadcastRow = ExpandingBroadcast & { audience_id: string; request_hash: string; cursor: string | null };

/**
 * Expands one batch of one broadcast. In a single transaction it takes the broadcast's row
 * (SKIP LOCKED: several processors share broadcasts, never one batch), reads the next members
 * after the stored cursor in user id order, then in one statement inserts their notifications
 * and recipient rows, lists the batch in publish_outbox and moves the cursor past it. A crash
 * before the commit leaves nothing and the batch is done again; after it, the cursor says the
 * batch is done: no member is skipped, none gets two (broadcast_recipients' key holds that too).
 * A broadcast with no member left is marked expanded: all its notifications are stored and
 * listed in the outbox until published, though the last batch's publishes may still be in
 * flight (or left to the recovery sweep) when that commits.
 *
 * The batch's ids, users and partitions travel once, as three arrays the statement's parts
 * share, and nothing comes back per row: every notification of the batch has the
 * transaction's now() as created_at, which the statement answers once.
 *
 * `settled` are outbox rows of earlier batches whose publishes were all acknowledged: they are
 * deleted in the same transaction, which spares each batch a transaction of its own for that.
 * A row the recovery sweep holds is skipped, not waited for with the broadcast's row locked:
 * the sweep deletes it. If this transaction fails they stay, and the caller settles them
 * otherwise (or the recovery sweep republishes them, which JetStream deduplicates by msg id).
 */
export async function expandBroadcastBatch(
  database: Database,
  batchSize: number,
  partitions: number,
  settled: readonly string[] = [],
): Promise<ExpansionStep> {
  const { sql } = database;
  return sql.begin(async (tx): Promise<ExpansionStep> => {
    const [broadcast] = await tx<BroadcastRow[]>`
      with settled as (
        delete from publish_outbox where id in (
          select id from publish_outbox where id = any(${settled as string[]}::bigint[]) for update skip locked)
      )
      select b.id, b.client_id, b.audience_id, b.category, b.template_id, b.template_version, b.requested_channels,
        b.data, b.request_hash, b.cursor,
        to_char((b.created_at + v.ttl_seconds * interval '1 second') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
          as deliver_by
      from broadcasts b
      left join template_versions v on v.template_id = b.template_id and v.version = b.template_version
      where b.status = 'expanding' order by b.created_at limit 1 for update of b skip locked`;
    if (!broadcast) return { kind: "idle" };
    const members = await tx<{ user_id: string }[]>`
      select user_id from audience_members
      where audience_id = ${broadcast.audience_id} and user_id > ${broadcast.cursor ?? ""}
      order by user_id limit ${batchSize}`;
    if (members.length === 0) {
      await tx`update broadcasts set status = 'expanded', finished_at = now(), updated_at = now() where id = ${broadcast.id}`;
      return { kind: "finished", broadcastId: broadcast.id };
    }
    const recipients: ExpandedRecipient[] = new Array(members.length);
    const ids: string[] = new Array(members.length);
    const userIds: string[] = new Array(members.length);
    const parts: number[] = new Array(members.length);
    for (let i = 0; i < members.length; i++) {
      const userId = (members[i] as { user_id: string }).user_id;
      const recipient = { notification_id: newId(), user_id: userId, partition: partitionOf(userId, partitions) };
      recipients[i] = recipient;
      ids[i] = recipient.notification_id;
      userIds[i] = userId;
      parts[i] = recipient.partition;
    }
    const [written] = await tx<{ outbox_id: string; created_at: Date }[]>`
      with batch as (
        select * from unnest(${ids}::text[], ${userIds}::text[], ${parts}::int[]) as t(id, user_id, partition)
      ),
      inserted as (
        insert into notifications (id, client_id, user_id, category, template_id, template_version, priority,
          requested_channels, data, dedup_key, request_hash, partition, created_at, deliver_by)
        select id, ${broadcast.client_id}, user_id, ${broadcast.category}, ${broadcast.template_id},
          ${broadcast.template_version}, 'promotional', ${broadcast.requested_channels}::text[],
          ${sql.json(broadcast.data as never)}, ${`broadcast:${broadcast.id}:`} || user_id, ${broadcast.request_hash},
          partition, now(), ${broadcast.deliver_by}::timestamptz
        from batch
      ),
      recipients as (
        insert into broadcast_recipients (broadcast_id, user_id, notification_id)
        select ${broadcast.id}, user_id, id from batch
      ),
      outbox as (
        insert into publish_outbox (notification_ids) select array_agg(id) from batch returning id
      ),
      moved as (
        update broadcasts set cursor = ${userIds.at(-1) as string}, expanded = expanded + ${userIds.length},
          updated_at = now()
        where id = ${broadcast.id}
      )
      select (select id from outbox)::text as outbox_id, now() as created_at`;
    const expanding: ExpandingBroadcast = {
      id: broadcast.id,
      client_id: broadcast.client_id,
      category: broadcast.category,
      template_id: broadcast.template_id,
      template_version: broadcast.template_version,
      requested_channels: broadcast.requested_channels,
      data: broadcast.data,
      deliver_by: broadcast.deliver_by,
    };
    if (!written) throw new Error("the batch statement answered no row");
    return {
      kind: "expanded",
      broadcast: expanding,
      recipients,
      createdAt: written.created_at,
      outboxId: written.outbox_id,
    };
  });
}
