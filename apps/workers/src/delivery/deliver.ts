import type { Bus, Disposition, KV } from "@notify/bus";
import { type ChannelStatus, statusesMovableTo, type WorkItem } from "@notify/core";
import type { Database } from "@notify/db";
import type { Logger } from "@notify/log";
import type { Provider } from "@notify/providers";
import { retryDelayMs } from "./backoff.js";

export interface DeliverDeps {
  database: Database;
  bus: Bus;
  guard: KV;
  provider: Provider;
  log: Logger;
  maxAttempts: number;
  retryBaseMs: number;
  retryMaxMs: number;
}

const encoder = new TextEncoder();

/** Moves a channel forward only (invariant 3): a status never overwrites a later one. */
async function setStatus(
  deps: DeliverDeps,
  item: WorkItem,
  to: ChannelStatus,
  fields: { reason?: string | null; providerId?: string | null; attempts?: number },
): Promise<boolean> {
  const rows = await deps.database.sql`
    update notification_channels set status = ${to}, reason = ${fields.reason ?? null},
      provider = coalesce(${fields.providerId ? deps.provider.name : null}, provider),
      provider_id = coalesce(${fields.providerId ?? null}, provider_id),
      attempts = coalesce(${fields.attempts ?? null}, attempts), updated_at = now()
    where notification_id = ${item.notification_id} and channel = ${item.channel} and status = any(${statusesMovableTo(to)})`;
  return rows.count > 0;
}

async function recordAttempt(
  deps: DeliverDeps,
  item: WorkItem,
  attempt: number,
  outcome: string,
  providerId: string | null,
  error: string | null,
) {
  await deps.database.sql`
    insert into delivery_attempts (notification_id, channel, attempt, outcome, provider_id, error)
    values (${item.notification_id}, ${item.channel}, ${attempt}, ${outcome}, ${providerId}, ${error})
    on conflict do nothing`;
}

async function deadLetter(deps: DeliverDeps, item: WorkItem, reason: string, attempts: number) {
  const history = await deps.database.sql`
    select attempt, outcome, provider_id, error, at from delivery_attempts
    where notification_id = ${item.notification_id} and channel = ${item.channel} order by attempt`;
  await deps.bus.publish(
    deps.bus.subjects.dlq(item.channel),
    { item, reason, attempts, history, dead_lettered_at: new Date().toISOString() },
    `${item.notification_id}:${item.channel}:dlq`,
  );
}

/**
 * Delivers one work item (spec rules 9 and 13, invariant 2). The send guard for
 * (notification, channel) is claimed atomically before the provider call; a message that
 * finds the guard taken never sends. A definite provider failure releases the guard, so the
 * retry may send; a crash between the provider's acceptance and the status write leaves the
 * guard in place and the channel is shown as unsettled until a receipt settles it.
 */
export async function deliver(deps: DeliverDeps, item: WorkItem): Promise<Disposition> {
  const key = `${item.notification_id}.${item.channel}`;
  const [row] = await deps.database.sql<{ status: ChannelStatus; attempts: number }[]>`
    select status, attempts from notification_channels where notification_id = ${item.notification_id} and channel = ${item.channel}`;
  if (!row) return { terminate: "no channel row" };
  if (!["pending", "retrying", "parked", "deferred"].includes(row.status)) return { ack: true };

  try {
    await deps.guard.create(key, encoder.encode(JSON.stringify({ state: "sending", at: Date.now() })));
  } catch {
    // Someone holds or held the claim: it may have sent. Never resend; show it as unsettled.
    await setStatus(deps, item, "unsettled", { reason: "send_outcome_unknown" });
    deps.log.warn(
      { notification_id: item.notification_id, channel: item.channel },
      "send guard already claimed; not resending",
    );
    return { ack: true };
  }

  const attempt = row.attempts + 1;
  const result = await deps.provider.send({
    notificationId: item.notification_id,
    channel: item.channel,
    to: item.to,
    subject: item.subject,
    body: item.body,
    category: item.category,
    priority: item.priority,
  });
  const log = deps.log.child({ notification_id: item.notification_id, channel: item.channel, attempt });

  if (result.outcome === "accepted") {
    await deps.guard.put(
      key,
      encoder.encode(JSON.stringify({ state: "sent", provider_id: result.providerId, at: Date.now() })),
    );
    await recordAttempt(deps, item, attempt, "accepted", result.providerId, null);
    await setStatus(deps, item, "delivered", { providerId: result.providerId, attempts: attempt });
    log.info({ provider_id: result.providerId }, "delivered");
    return { ack: true };
  }

  await recordAttempt(deps, item, attempt, result.outcome, null, result.reason);
  if (result.outcome === "transient" && attempt < deps.maxAttempts) {
    // The provider said no definitively: release the claim so the retry may send.
    await deps.guard.delete(key);
    await setStatus(deps, item, "retrying", { reason: result.reason, attempts: attempt });
    const delay = retryDelayMs(attempt, deps.retryBaseMs, deps.retryMaxMs, result.retryAfterMs);
    log.warn({ reason: result.reason, delay_ms: delay }, "transient failure; retrying");
    return { retryInMs: delay };
  }
  const reason = result.outcome === "transient" ? `retries exhausted: ${result.reason}` : result.reason;
  await deps.guard.put(key, encoder.encode(JSON.stringify({ state: "failed", at: Date.now() })));
  await deadLetter(deps, item, reason, attempt);
  await setStatus(deps, item, "failed", { reason, attempts: attempt });
  log.warn({ reason }, "dead-lettered");
  return { ack: true };
}
