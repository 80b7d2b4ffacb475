import type { Bus } from "@notify/bus";
import type { DeadLetter, DeadLetterClass, WorkItem } from "@notify/core";
import { readDeliveryHistory, type Sql } from "@notify/db";

/**
 * Publishes a dead letter with its full context: the original request from the
 * notification log, the rendered work item, and every attempt. The msg id carries the attempt,
 * so a worker finishing a dead-lettering it crashed in repeats the same message (JetStream drops
 * it), while a replayed item that fails again gets a dead letter of its own.
 */
export async function publishDeadLetter(
  sql: Sql,
  bus: Bus,
  letter: { item: WorkItem; class: DeadLetterClass; reason: string; provider: string; attempts: number },
): Promise<void> {
  const { item } = letter;
  const { notification, history } = await readDeliveryHistory(sql, item);
  const body: DeadLetter = {
    version: 1,
    class: letter.class,
    reason: letter.reason,
    channel: item.channel,
    lane: item.priority,
    provider: letter.provider,
    attempts: letter.attempts,
    notification,
    item,
    history,
    dead_lettered_at: new Date().toISOString(),
  };
  await bus.publish(
    bus.subjects.dlq(item.channel),
    body,
    `${item.notification_id}:${item.channel}:dlq:${letter.attempts}`,
  );
}
