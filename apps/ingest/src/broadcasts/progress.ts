import { AppError } from "@notify/core";
import {
  type BroadcastProgress,
  cancelBroadcastExpansion,
  type Database,
  listBroadcastProgress,
  pauseBroadcastExpansion,
  readBroadcastProgress,
  resumeBroadcastExpansion,
} from "@notify/db";
import { toAppError } from "@notify/http";
import type { OpsBroadcastsQuery, OpsBroadcastView } from "../ops/schemas.js";
import type { BroadcastView } from "./schemas.js";

/** Whose broadcast a call may act on: one client's (its own routes), or any (null: the operator's routes). */
type Owner = string | null;

const postgres = async <T>(work: () => Promise<T>): Promise<T> => {
  try {
    return await work();
  } catch (error) {
    throw toAppError(error);
  }
};

async function read(database: Database, owner: Owner, id: string): Promise<BroadcastProgress> {
  const progress = await postgres(() => readBroadcastProgress(database, id, { clientId: owner ?? undefined }));
  if (!progress) throw new AppError("not_found", `broadcast ${id} does not exist`);
  return progress;
}

const clientView = ({ client_id: _, ...view }: BroadcastProgress) => view as BroadcastView;
const opsView = (progress: BroadcastProgress) => progress as OpsBroadcastView;

/**
 * A broadcast's progress, counted from its recipients' channel results (each recipient once,
 * by the best thing that happened to it). One client never sees another's broadcast (404).
 */
export async function getBroadcast(database: Database, clientId: string, id: string): Promise<BroadcastView> {
  return clientView(await read(database, clientId, id));
}

type Change = typeof cancelBroadcastExpansion;

/** Applies a change of status (each leaves a broadcast it does not apply to as it is), then reads it. */
async function change(database: Database, owner: Owner, id: string, apply: Change): Promise<BroadcastProgress> {
  await postgres(() => apply(database, owner, id));
  return read(database, owner, id);
}

/**
 * What an operator may do to a broadcast's expansion. The expander holds the broadcast's row
 * while it writes a batch, so each change lands between two batches and the counts it leaves
 * are exact; recipients already expanded keep their notifications (queued, and going through
 * preferences and delivery like any other).
 * - pause: the batch in hand finishes, no further one is taken (only an expanding broadcast);
 * - resume: a paused broadcast goes on where it stopped;
 * - cancel: no one after the cursor gets a notification (expanding or paused).
 * Any other status is left as it is.
 */
const ACTIONS = { pause: pauseBroadcastExpansion, resume: resumeBroadcastExpansion, cancel: cancelBroadcastExpansion };
export type BroadcastAction = keyof typeof ACTIONS;

/** POST /api/v1/broadcasts/{id}/{pause,resume,cancel}: a change to one of the client's own broadcasts. */
export async function changeBroadcast(
  database: Database,
  clientId: string,
  id: string,
  action: BroadcastAction,
): Promise<BroadcastView> {
  return clientView(await change(database, clientId, id, ACTIONS[action]));
}

/** POST /api/v1/ops/broadcasts/{id}/{pause,resume,cancel}: the same change on any client's broadcast. */
export async function changeAnyBroadcast(
  database: Database,
  id: string,
  action: BroadcastAction,
): Promise<OpsBroadcastView> {
  return opsView(await change(database, null, id, ACTIONS[action]));
}

/** GET /api/v1/ops/broadcasts: every client's broadcasts, newest first, offset-paged. */
export async function listAnyBroadcasts(
  database: Database,
  query: OpsBroadcastsQuery,
): Promise<{ data: OpsBroadcastView[]; page: number; page_size: number; total_count: number }> {
  const { broadcasts, total } = await postgres(() =>
    listBroadcastProgress(database, {
      ...(query.status === undefined ? {} : { status: query.status }),
      offset: (query.page - 1) * query.page_size,
      limit: query.page_size,
    }),
  );
  return { data: broadcasts.map(opsView), page: query.page, page_size: query.page_size, total_count: total };
}
