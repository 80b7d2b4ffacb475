import type { DeadLetter, WorkItem } from "@notify/core";

/**
 * A dead letter as the workers write one: a permanent SendGrid refusal of an email, after one
 * attempt. `item` names the notification and user; anything else may be overridden.
 */
export function deadLetterOf(
  item: Pick<WorkItem, "notification_id" | "user_id"> & Partial<WorkItem>,
  overrides: Partial<Omit<DeadLetter, "item">> = {},
): DeadLetter {
  return {
    version: 1,
    class: "permanent",
    reason: "sendgrid 400: invalid address",
    channel: item.channel ?? "email",
    lane: item.priority ?? "transactional",
    provider: "sendgrid",
    attempts: 1,
    notification: null,
    item: {
      channel: "email",
      priority: "transactional",
      category: "orders",
      to: "old@example.com",
      subject: "Hi",
      body: "Hello",
      attempt: 1,
      ...item,
    },
    history: [],
    dead_lettered_at: new Date().toISOString(),
    ...overrides,
  };
}
