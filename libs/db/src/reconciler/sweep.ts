import type { Database } from "../pool.js";

// A sweep run once across the deployment, and where it stands between runs.

/**
 * Runs `work` only if no other process holds the lock `name` (a session advisory lock on one
 * reserved connection), so a periodic sweep runs once across the deployment however many
 * instances schedule it. Answers undefined when another holds it. A process that dies releases
 * it with its connection.
 */
export async function withSweepLock<T>(
  database: Database,
  name: string,
  work: () => Promise<T>,
): Promise<T | undefined> {
  const reserved = await database.sql.reserve();
  try {
    const [row] = await reserved<{ locked: boolean }[]>`select pg_try_advisory_lock(hashtext(${name})) as locked`;
    if (!row?.locked) return undefined;
    try {
      return await work();
    } finally {
      await reserved`select pg_advisory_unlock(hashtext(${name}))`;
    }
  } finally {
    reserved.release();
  }
}

/** Where the sweep `name` stands; `initial` when it never ran. */
export async function readSweepPosition(database: Database, name: string, initial: string): Promise<string> {
  const [row] = await database.sql<{ position: string }[]>`select position from sweep_positions where name = ${name}`;
  return row?.position ?? initial;
}

export async function saveSweepPosition(database: Database, name: string, position: string): Promise<void> {
  await database.sql`
    insert into sweep_positions (name, position) values (${name}, ${position})
    on conflict (name) do update set position = excluded.position, updated_at = now()`;
}
