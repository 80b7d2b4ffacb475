import { randomUUID } from "node:crypto";
import { type ChannelStatus, statusesMovableTo } from "@notify/core";
import type { Sql } from "@notify/db";
import { listen } from "@notify/http";
import { captureLogger, freshBus, freshDatabase } from "@notify/testing";
import { createApp, type ReceiptsDeps } from "../src/app.js";
import { startReceiptSweep } from "../src/receipts/sweep.js";

type Tap = { teardown(fn: () => unknown): void };

/** The receipts app over real HTTP (providers' sandboxes post to it), its database and a fast sweep. */
export async function startReceipts(
  t: Tap,
  options: Partial<
    Pick<
      ReceiptsDeps,
      "plivoAuthToken" | "sendgridPublicKey" | "publicBaseUrl" | "timestampWindow" | "metrics" | "smsReplies"
    >
  >,
  sweepOptions: { unmatchedRetentionHours?: number; purgeEveryMs?: number } = {},
) {
  const { database } = await freshDatabase(t);
  const bus = await freshBus(t);
  const { log, lines } = captureLogger("receipts");
  const server = await listen(createApp({ database, bus, log, isStopping: () => false, ...options }), 0, "127.0.0.1");
  const sweep = startReceiptSweep(database.sql, log, {
    intervalMs: 100,
    unmatchedRetentionHours: sweepOptions.unmatchedRetentionHours ?? 72,
    ...(options.metrics === undefined ? {} : { metrics: options.metrics }),
    ...(sweepOptions.purgeEveryMs === undefined ? {} : { purgeEveryMs: sweepOptions.purgeEveryMs }),
  });
  t.teardown(async () => {
    await sweep.stop();
    await server.close();
  });
  return { database, bus, log, sql: database.sql, url: `http://127.0.0.1:${server.port}`, lines };
}

/** A notification with one channel row, as the processor and a worker leave it. */
export async function seedChannel(
  sql: Sql,
  fields: { channel: string; status: string; provider?: string; providerId?: string },
): Promise<string> {
  const id = randomUUID();
  await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, 'shop', 'user-1', 'account', 'welcome', 'transactional', '{}', ${randomUUID()}, 'x', 0)`;
  await sql`insert into notification_channels (notification_id, channel, status, provider, provider_id)
    values (${id}, ${fields.channel}, ${fields.status}, ${fields.provider ?? null}, ${fields.providerId ?? null})`;
  return id;
}

/**
 * What the worker writes once the provider accepted. Like the worker's own write, the status
 * only moves forward: a receipt that arrived first (the sandbox posts right after answering) and
 * already settled the channel is not undone.
 */
export const recordSend = (
  sql: Sql,
  id: string,
  channel: string,
  provider: string,
  providerId: string,
  status: ChannelStatus = "delivered",
) =>
  sql`update notification_channels set provider = ${provider}, provider_id = ${providerId},
      status = case when status = any(${statusesMovableTo(status)}) then ${status} else status end
    where notification_id = ${id} and channel = ${channel}`;

export async function channelRow(sql: Sql, id: string, channel: string) {
  const [row] = await sql<{ status: string; reason: string | null; provider_id: string | null }[]>`
    select status, reason, provider_id from notification_channels where notification_id = ${id} and channel = ${channel}`;
  return row;
}

export const newId = randomUUID;
