import { type BroadcastProgress, type Database, readBroadcastProgress } from "@notify/db";

/** A broadcast's progress, whichever client sent it; fails for an unknown id. */
export async function broadcastProgress(database: Database, id: string): Promise<BroadcastProgress> {
  const progress = await readBroadcastProgress(database, id);
  if (!progress) throw new Error(`no broadcast ${id}`);
  return progress;
}
