import { sendDueDigests } from "@notify/db";
import type { RouteDeps } from "../routing/plan.js";

/**
 * Sends the digests that are due, batch after batch while batches come back full: each becomes
 * a notification of its own, stored with the digest marked sent in one transaction, then
 * published to its lane after the commit, where it is routed like any other. A publish that
 * fails leaves the stored notification to the reconciler, which routes it from its row (the
 * lane message id is the notification id, so a publish repeated by both is stored once).
 */
export async function sendDigests(deps: RouteDeps, batchSize = 100, isStopping: () => boolean = () => false) {
  let sent = 0;
  for (;;) {
    const batch = await sendDueDigests(deps.database, {
      now: deps.now(),
      limit: batchSize,
      partitions: deps.bus.naming.partitions,
    });
    const published = await Promise.allSettled(
      batch.map(({ message, partition }) =>
        deps.bus.publish(deps.bus.subjects.lane(message.priority, partition), message, message.notification_id),
      ),
    );
    const failed = published.filter((p) => p.status === "rejected").length;
    if (failed > 0)
      deps.log.warn(
        { failed, sent: batch.length },
        "digest notifications stored but not published; the reconciler routes them",
      );
    sent += batch.length;
    if (batch.length > 0) deps.log.info({ digests: batch.length }, "sent digests");
    if (batch.length < batchSize || isStopping()) return sent;
  }
}
