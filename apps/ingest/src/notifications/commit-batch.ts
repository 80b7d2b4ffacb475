import type { Bus } from "@notify/bus";
import { type AcceptedRow, acceptNotifications, type Database } from "@notify/db";
import type { Logger } from "@notify/log";
import { answerClaimedKeys, DEDUP_WINDOW_HOURS, type Pending } from "./idempotency.js";
import { publishLanes, settleOutbox } from "./publish.js";
import type { Settler } from "./settler.js";

/** The row stores its request's traceparent, when tracing is on (no field at all when off). */
const withTraceParent = (p: Pending, row: AcceptedRow): AcceptedRow => {
  if (p.traceParent !== undefined) row.trace_parent = p.traceParent;
  return row;
};

/**
 * One group commit: stores the batch (claiming keys, inserting rows, listing them in the
 * outbox, in one statement), publishes what was stored, settles the outbox, and only then
 * answers each caller, so that a 503 client retrying at once finds its key released. Requests
 * whose key was already claimed are answered from the existing record.
 */
export async function commitBatch(
  deps: { database: Database; bus: Bus; log: Logger },
  settler: Settler,
  batch: Pending[],
): Promise<void> {
  // Two requests of one batch with the same key: the first claims it, the rest are in flight.
  // A request that may only replay an accepted one (its deadline passed) is looked up, never stored.
  const seen = new Set<string>();
  const first: Pending[] = [];
  const duplicates: Pending[] = [];
  const replaysOnly = batch.filter((item) => item.refusal !== undefined);
  for (const item of batch) {
    if (item.refusal !== undefined) continue;
    const k = `${item.input.clientId}\u0000${item.input.idempotencyKey}`;
    (seen.has(k) ? duplicates : first).push(item);
    seen.add(k);
  }

  const { inserted, createdAt, outboxId } = await acceptNotifications(
    deps.database,
    first.map((p) =>
      withTraceParent(p, {
        id: p.message.notification_id,
        client_id: p.input.clientId,
        key: p.input.idempotencyKey,
        request_hash: p.requestHash,
        user_id: p.message.user_id,
        category: p.message.category,
        template_id: p.message.template_id,
        template_version: p.message.template_version ?? null,
        priority: p.message.priority,
        channels: p.message.channels,
        data: p.message.data,
        partition: p.partition,
        deliver_by: p.message.deliver_by ?? null,
        send_at: p.message.send_at ?? null,
        send_at_local: p.input.request.send_at_local ?? null,
        digest: p.message.digest ?? null,
        throttle: p.message.throttle ?? null,
        fallback: p.fallback,
      }),
    ),
    DEDUP_WINDOW_HOURS,
  );
  const claimed: Pending[] = [];
  const unclaimed: Pending[] = [];
  for (const item of first) (inserted.has(item.message.notification_id) ? claimed : unclaimed).push(item);
  unclaimed.push(...duplicates);
  if (claimed.length > 0) {
    if (createdAt === null) throw new Error("the accept statement stored notifications without their time");
    const stored = createdAt.toISOString();
    for (const item of claimed) item.message.created_at = stored;
  }
  const outcome = await publishLanes(deps, claimed);
  await settleOutbox(deps, settler, outboxId, claimed.length, outcome);

  for (const { item, error } of outcome.failures) item.reject(error);
  const ok = new Set(outcome.published);
  for (const item of claimed) {
    if (ok.has(item.message.notification_id))
      item.resolve({ kind: "accepted", notificationId: item.message.notification_id });
  }
  const lookups = [...unclaimed, ...replaysOnly];
  if (lookups.length > 0) await answerClaimedKeys(deps.database, (id) => settler.has(id), lookups);
}
