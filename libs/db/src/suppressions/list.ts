import { AppError, decodeCursor, encodeCursor, type KeysetPosition } from "@notify/core";
import type { Database, Sql } from "../pool.js";
import { ENTRY_COLUMNS, type SuppressionEntry } from "./entries.js";

export interface SuppressionListQuery {
  /** The client whose entries are listed, with those that hold for every client; null: every entry. */
  clientId: string | null;
  channel?: string;
  reason?: string;
  /** Entries whose (normalised) address starts with this. */
  address_prefix?: string;
  /** The previous page's `next_cursor`. */
  cursor?: string;
  limit: number;
  /**
   * The HMAC key of the cursor (the deployment's CURSOR_SECRET). Without one, a fixed key: the
   * cursor grants nothing, as every page is confined to `clientId` in the statement, and the MAC
   * still refuses a cursor that was edited or issued for another list, client or filters.
   */
  cursorSecret?: string;
}

const FIXED_CURSOR_KEY = "notify-suppressions";

/** What a cursor is bound to: the list, the client and every filter (not the limit). */
const cursorContext = (q: SuppressionListQuery) =>
  JSON.stringify(["suppressions", q.clientId, q.channel ?? null, q.reason ?? null, q.address_prefix ?? null]);

/** A cursor's position: created_at in microseconds, and the entry's key as [channel, address, client_id]. */
interface Position {
  micros: bigint;
  key: [string, string, string];
}

function readCursor(secret: string, context: string, cursor: string): Position {
  const { micros, id } = decodeCursor(secret, context, cursor);
  let key: unknown;
  try {
    key = JSON.parse(id);
  } catch {
    key = null;
  }
  if (!Array.isArray(key) || key.length !== 3 || !key.every((part) => typeof part === "string")) {
    throw new AppError("invalid_cursor", "cursor: not a cursor of this list", {
      fields: [{ field: "cursor", message: "not a cursor of this list" }],
    });
  }
  return { micros, key: key as [string, string, string] };
}

type ListedRow = SuppressionEntry & { micros: string };

/**
 * The entries of the list, newest first by (created_at, channel, address, client_id), all
 * descending, keyset-paged. For a client, its own entries and the ones that hold for every client
 * are read as two scans of suppressions_client_created_idx merged in order (one `client_id in`
 * scan would sort every entry of both for each page); the keyset's `created_at <=` bounds each
 * scan where the OR alone would only filter it. Throws an `invalid_cursor` AppError (400) for a
 * cursor that is not this list's.
 */
export async function listSuppressions(
  database: Database,
  q: SuppressionListQuery,
): Promise<{ data: SuppressionEntry[]; next_cursor: string | null }> {
  const { sql } = database;
  const secret = q.cursorSecret ?? FIXED_CURSOR_KEY;
  const context = cursorContext(q);
  const after = q.cursor === undefined ? null : readCursor(secret, context, q.cursor);
  const take = q.limit + 1;
  const branch = (client: string | null) => sql`
    select ${sql.unsafe(ENTRY_COLUMNS)}, (extract(epoch from created_at) * 1000000)::bigint::text as micros
    from suppressions
    where true
      ${client === null ? sql`` : sql`and client_id = ${client}`}
      ${q.channel === undefined ? sql`` : sql`and channel = ${q.channel}`}
      ${q.reason === undefined ? sql`` : sql`and reason = ${q.reason}`}
      ${q.address_prefix === undefined ? sql`` : sql`and starts_with(address, ${q.address_prefix})`}
      ${after === null ? sql`` : keyset(sql, after)}
    order by created_at desc, channel desc, address desc, client_id desc
    limit ${take}`;
  const rows =
    q.clientId === null || q.clientId === ""
      ? await sql<ListedRow[]>`${branch(q.clientId)}`
      : await sql<ListedRow[]>`
          select * from ((${branch(q.clientId)}) union all (${branch("")})) as s
          order by created_at desc, channel desc, address desc, client_id desc
          limit ${take}`;
  const page = rows.slice(0, q.limit);
  const last = page.at(-1);
  const position: KeysetPosition | null =
    last && rows.length > q.limit
      ? { micros: BigInt(last.micros), id: JSON.stringify([last.channel, last.address, last.client_id]) }
      : null;
  return {
    data: page.map(({ micros: _, ...entry }) => entry),
    next_cursor: position === null ? null : encodeCursor(secret, context, position),
  };
}

const keyset = (sql: Sql, after: Position) => {
  const instant = sql`timestamptz 'epoch' + ${after.micros.toString()}::bigint * interval '1 microsecond'`;
  const [channel, address, clientId] = after.key;
  return sql`and created_at <= ${instant}
    and (created_at < ${instant} or (channel, address, client_id) < (${channel}::text, ${address}::text, ${clientId}::text))`;
};
