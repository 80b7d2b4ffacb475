import type { Database } from "../pool.js";

// The operator's and the client's hold on a broadcast's expansion: pause, resume, cancel.

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
