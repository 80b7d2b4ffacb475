import { withDeadline } from "@notify/core";
import type { Database } from "../pool.js";

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
 * waits at most `waitMs` (RECOUNT_WAIT_MS) for a new count when it has an old one (counted_at
 * says which).
 */
export async function readBroadcastProgress(
  database: Database,
  id: string,
  { clientId, waitMs = RECOUNT_WAIT_MS }: { clientId?: string; waitMs?: number } = {},
): Promise<BroadcastProgress | null> {
  const { sql } = database;
  const [row] = await sql<BroadcastRead[]>`${headWithCount(database)}
    where b.id = ${id} ${clientId === undefined ? sql`` : sql`and b.client_id = ${clientId}`}`;
  if (!row) return null;
  return progressOf(row, row.fresh ? (row as Counted) : await recount(database, row.id, row, waitMs));
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
