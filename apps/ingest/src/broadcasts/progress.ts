import { AppError } from "@notify/core";
import { cancelBroadcastExpansion, type Database, readBroadcastProgress } from "@notify/db";
import { asDependencyError } from "../dependency.js";
import type { BroadcastView } from "./schemas.js";

/**
 * A broadcast's progress, counted from its recipients' channel results (each recipient once,
 * by the best thing that happened to it). One client never sees another's broadcast (404).
 */
export async function getBroadcast(database: Database, clientId: string, id: string): Promise<BroadcastView> {
  let progress: Awaited<ReturnType<typeof readBroadcastProgress>>;
  try {
    progress = await readBroadcastProgress(database, id, clientId);
  } catch (error) {
    throw asDependencyError(error, "postgres");
  }
  if (!progress) throw new AppError("not_found", `broadcast ${id} does not exist`);
  return progress as BroadcastView;
}

/**
 * Stops expanding: recipients already expanded keep their notifications (they are queued and
 * go through preferences and delivery like any other); no one after the cursor gets one. The
 * expander holds the broadcast's row while it writes a batch, so the cancel lands between two
 * batches and the count it leaves is exact.
 */
export async function cancelBroadcast(database: Database, clientId: string, id: string): Promise<BroadcastView> {
  try {
    await cancelBroadcastExpansion(database, clientId, id);
  } catch (error) {
    throw asDependencyError(error, "postgres");
  }
  return getBroadcast(database, clientId, id);
}
