import { createHash } from "node:crypto";
import type { Bus } from "@notify/bus";
import { AppError, type LaneMessage, type NotificationRequest, newId, partitionOf } from "@notify/core";
import type { Database } from "@notify/db";
import type { Logger } from "@notify/log";
import { asDependencyError } from "../dependency.js";
import { checkTemplate, type TemplateInfo } from "./templates.js";

export interface CreateDeps {
  database: Database;
  bus: Bus;
  templates: (id: string) => Promise<TemplateInfo | null>;
  log: Logger;
}

export type CreateResult = { kind: "accepted"; notificationId: string } | { kind: "replayed"; notificationId: string };

export interface CreateInput {
  clientId: string;
  idempotencyKey: string;
  request: NotificationRequest;
}

/** Canonical JSON (sorted keys) so that the same body always hashes the same. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.keys(value as Record<string, unknown>)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value);
}

/** The dedup window of the spec (24 h) and the in-progress lock of a first request (30 s). */
export const DEDUP_WINDOW_HOURS = 24;
export const IN_FLIGHT_MS = 30_000;

interface Pending {
  input: CreateInput;
  message: LaneMessage;
  requestHash: string;
  partition: number;
  resolve(result: CreateResult): void;
  reject(error: unknown): void;
}

interface ExistingKey {
  client_id: string;
  key: string;
  request_hash: string;
  notification_id: string;
  /** Still listed in the outbox: its publish is in flight, or left for the recovery sweep. */
  unpublished: boolean;
  created_at: Date;
}

/**
 * A publish that timed out may still land (the client buffers while reconnecting), so the row
 * is kept for the recovery sweep; any other failure means nothing was stored by JetStream.
 */
const isAmbiguous = (error: unknown) => (error as { name?: string })?.name === "TimeoutError";

export interface Ingestor {
  create(input: CreateInput): Promise<CreateResult>;
  /** Waits for the batches in flight (shutdown). */
  drain(): Promise<void>;
}

/**
 * Accepts notifications (spec rule 1, invariant 1) with group commit: requests that arrive
 * while a batch is being written wait for the next one, so under load one multi-row statement
 * claims the idempotency keys and inserts the rows of many requests, their lane publishes go
 * out together, and one statement settles their outbox rows. Each caller still hears 202 only
 * after its own row is committed and its own publish is acknowledged.
 *
 * A publish that definitely failed removes the row and releases the key (503, nothing left
 * behind); a publish whose outcome is unknown keeps the row for the recovery sweep (503, and a
 * retry with the same key gets 409 while it is settled, then 200 with the same id).
 */
export function createIngestor(
  deps: CreateDeps,
  options: { maxBatch?: number; maxConcurrentBatches?: number } = {},
): Ingestor {
  const maxBatch = options.maxBatch ?? 512;
  const maxConcurrent = options.maxConcurrentBatches ?? 2;
  const queue: Pending[] = [];
  const active = new Set<Promise<void>>();
  const settler = createSettler(deps);

  const pump = () => {
    while (active.size < maxConcurrent && queue.length > 0) {
      const batch = queue.splice(0, maxBatch);
      const run: Promise<void> = flush(deps, settler, batch)
        .catch((error: unknown) => {
          const failure = asDependencyError(error, "postgres");
          if (failure.status >= 500) deps.log.error({ err: error, size: batch.length }, "batch failed");
          for (const item of batch) item.reject(failure);
        })
        .finally(() => {
          active.delete(run);
          pump();
        });
      active.add(run);
    }
  };

  return {
    async create(input) {
      const { request } = input;
      const template = checkTemplate(
        await deps.templates(request.template_id).catch((error: unknown) => {
          throw asDependencyError(error, "postgres");
        }),
        request.template_id,
        request.data,
      );
      if (!deps.bus.isConnected()) {
        throw new AppError("dependency_unavailable", "nats is unavailable", { context: { retryAfterSeconds: 1 } });
      }
      const id = newId();
      const message: LaneMessage = {
        notification_id: id,
        client_id: input.clientId,
        user_id: request.user_id,
        category: request.category,
        template_id: request.template_id,
        template_version: template.version,
        priority: request.priority,
        channels: request.channels ?? null,
        data: request.data,
        created_at: "",
      };
      return new Promise<CreateResult>((resolve, reject) => {
        queue.push({
          input,
          message,
          requestHash: createHash("sha256").update(canonicalJson(request)).digest("hex"),
          partition: partitionOf(request.user_id, deps.bus.naming.partitions),
          resolve,
          reject,
        });
        pump();
      });
    },
    async drain() {
      while (active.size > 0 || queue.length > 0) await Promise.allSettled([...active]);
      await settler.stop();
    },
  };
}

async function flush(deps: CreateDeps, settler: Settler, batch: Pending[]): Promise<void> {
  const { sql } = deps.database;
  // Two requests of one batch with the same key: the first claims it, the rest are in flight.
  const seen = new Set<string>();
  const first: Pending[] = [];
  const duplicates: Pending[] = [];
  for (const item of batch) {
    const k = `${item.input.clientId}\u0000${item.input.idempotencyKey}`;
    (seen.has(k) ? duplicates : first).push(item);
    seen.add(k);
  }

  // The batch travels as one JSON parameter: serialised natively, where twelve array
  // parameters cost more of ingest's CPU than the rest of the statement's handling.
  const rows = JSON.stringify(
    first.map((p) => ({
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
    })),
  );
  // One statement: claim the keys, insert the rows whose key was claimed, and list them in the
  // outbox; committed together or not at all.
  const inserted = await sql<{ id: string; created_at: Date; outbox_id: string | null }[]>`
    with input as (
      select * from json_to_recordset(${rows}::text::json) as i(id text, client_id text, key text, request_hash text,
        user_id text, category text, template_id text, template_version int, priority text, channels text[],
        data jsonb, partition int)
    ),
    claimed as (
      insert into idempotency_keys (client_id, key, request_hash, notification_id, created_at)
      select client_id, key, request_hash, id, now() from input
      on conflict (client_id, key) do update
        set request_hash = excluded.request_hash, notification_id = excluded.notification_id, created_at = now()
        where idempotency_keys.created_at < now() - make_interval(hours => ${DEDUP_WINDOW_HOURS})
      returning notification_id
    ),
    inserted as (
      insert into notifications (id, client_id, user_id, category, template_id, template_version, priority, requested_channels, data, dedup_key, request_hash, partition)
      select id, client_id, user_id, category, template_id, template_version, priority, channels, data, key,
             request_hash, partition
      from input where id in (select notification_id from claimed)
      returning id, created_at
    ),
    outbox as (
      insert into publish_outbox (notification_ids) select array_agg(id) from inserted having count(*) > 0 returning id
    )
    select id, created_at, (select id from outbox)::text as outbox_id from inserted`;

  const createdAt = new Map(inserted.map((row) => [row.id, row.created_at.toISOString()]));
  const claimed = first.filter((p) => createdAt.has(p.message.notification_id));
  const unclaimed = [...first.filter((p) => !createdAt.has(p.message.notification_id)), ...duplicates];
  const outboxId = inserted[0]?.outbox_id ?? null;

  const published: string[] = [];
  const failed: string[] = [];
  const ambiguous: string[] = [];
  const failures: Array<{ item: Pending; error: AppError }> = [];
  await Promise.all(
    claimed.map(async (item) => {
      item.message.created_at = createdAt.get(item.message.notification_id) as string;
      try {
        await deps.bus.publish(
          deps.bus.subjects.lane(item.message.priority, item.partition),
          item.message,
          item.message.notification_id,
        );
        published.push(item.message.notification_id);
      } catch (error) {
        if (isAmbiguous(error)) {
          ambiguous.push(item.message.notification_id);
          deps.log.warn(
            { err: error, notification_id: item.message.notification_id },
            "publish outcome unknown; the recovery sweep will settle it",
          );
        } else {
          failed.push(item.message.notification_id);
        }
        failures.push({ item, error: asDependencyError(error, "nats") });
      }
    }),
  );

  const unsettled = [...ambiguous];
  if (failed.length > 0) {
    const removed = outboxId === null ? 0 : await compensate(deps, outboxId, failed);
    // Rows not removed stay listed for the sweep, which publishes them (their callers got 503 and
    // a retry is answered 409, then 200 once the sweep has published).
    if (removed < failed.length) unsettled.push(...failed);
  }
  if (outboxId !== null) {
    if (unsettled.length === 0) {
      settler.add(outboxId, published);
    } else if (unsettled.length < claimed.length) {
      // Only the unsettled rows stay listed, before anyone is answered: a retry of a request of
      // this batch that was published is a replay (200), in every process, not a 409.
      await sql`update publish_outbox set notification_ids = ${unsettled}::text[] where id = ${outboxId}::bigint`.catch(
        (error: unknown) =>
          deps.log.warn({ err: error }, "narrowing the outbox row failed; the sweep republishes the batch"),
      );
    }
  }
  // Answered only now, so that a 503 client retrying at once finds its key released.
  for (const { item, error } of failures) item.reject(error);
  const ok = new Set(published);
  for (const item of claimed) {
    if (ok.has(item.message.notification_id))
      item.resolve({ kind: "accepted", notificationId: item.message.notification_id });
  }
  if (unclaimed.length > 0) await resolveExisting(deps, settler, unclaimed);
}

/**
 * Deletes notifications whose publish definitely failed, with their idempotency records (the
 * key is free again), but only while holding the batch's outbox row: if the recovery sweep holds
 * it, or already settled it, it may have published them, and they must stay. Answers how many
 * were deleted.
 */
async function compensate(deps: CreateDeps, outboxId: string, ids: string[]): Promise<number> {
  try {
    const [row] = await deps.database.sql<{ removed: number }[]>`
      with batch as (select id from publish_outbox where id = ${outboxId}::bigint for update skip locked),
      removed as (
        delete from notifications where id = any(${ids}::text[]) and exists (select 1 from batch)
        returning client_id, dedup_key
      ),
      released as (
        delete from idempotency_keys k using removed r where k.client_id = r.client_id and k.key = r.dedup_key
      )
      select count(*)::int as removed from removed`;
    return row?.removed ?? 0;
  } catch (error) {
    deps.log.warn({ err: error, count: ids.length }, "compensating delete failed; the recovery sweep will publish");
    return 0;
  }
}

interface Settler {
  /** The batch's outbox row can go: these of its notifications were published. */
  add(outboxId: string, published: string[]): void;
  /**
   * Published by this process recently: its outbox row is deleted, being deleted, or was deleted
   * within the last seconds (a duplicate's lookup may have read the outbox just before).
   */
  has(id: string): boolean;
  stop(): Promise<void>;
}

/**
 * Deletes settled outbox rows off the request path, many at a time, without waiting for the
 * WAL flush: a delete lost in a crash only makes the recovery sweep publish the batch again,
 * which JetStream deduplicates by msg id. This keeps one commit, the batch's own, between a
 * request and its 202.
 */
function createSettler(deps: CreateDeps, intervalMs = 20, rememberMs = 5000): Settler {
  let pendingRows: string[] = [];
  let pendingIds = new Set<string>();
  let writingIds = new Set<string>();
  // The id sets of the deletes of the last `rememberMs`, oldest first (kept whole: no copying).
  const recent: Array<{ at: number; ids: Set<string> }> = [];
  let running: Promise<void> = Promise.resolve();
  const settle = async () => {
    const now = Date.now();
    while (recent.length > 0 && (recent[0]?.at ?? now) < now - rememberMs) recent.shift();
    const rows = pendingRows;
    if (rows.length === 0) return;
    writingIds = pendingIds;
    pendingRows = [];
    pendingIds = new Set();
    await deps.database.sql
      .begin(async (tx) => {
        await tx`set local synchronous_commit = off`;
        await tx`delete from publish_outbox where id = any(${rows}::bigint[])`;
      })
      .catch((error: unknown) =>
        deps.log.warn({ err: error, count: rows.length }, "settling the outbox failed; the sweep will republish"),
      );
    recent.push({ at: Date.now(), ids: writingIds });
    writingIds = new Set();
  };
  const timer = setInterval(() => {
    running = running.then(settle);
  }, intervalMs);
  timer.unref();
  return {
    add(outboxId, published) {
      pendingRows.push(outboxId);
      for (const id of published) pendingIds.add(id);
    },
    has: (id) => pendingIds.has(id) || writingIds.has(id) || recent.some((settled) => settled.ids.has(id)),
    async stop() {
      clearInterval(timer);
      running = running.then(settle);
      await running;
    },
  };
}

/** Requests whose key was already claimed: a replay (200), a reuse (422) or in flight (409). */
async function resolveExisting(deps: CreateDeps, settler: Settler, items: Pending[]): Promise<void> {
  const rows = await deps.database.sql<ExistingKey[]>`
    select k.client_id, k.key, k.request_hash, k.notification_id, k.created_at,
      exists (select 1 from publish_outbox o where k.notification_id = any(o.notification_ids)) as unpublished
    from idempotency_keys k
    join unnest(${items.map((p) => p.input.clientId)}::text[], ${items.map((p) => p.input.idempotencyKey)}::text[]) as i(client_id, key)
      on k.client_id = i.client_id and k.key = i.key`;
  const byKey = new Map(rows.map((row) => [`${row.client_id}\u0000${row.key}`, row]));
  for (const item of items) {
    const existing = byKey.get(`${item.input.clientId}\u0000${item.input.idempotencyKey}`);
    if (!existing) {
      // The first request with this key failed and released it in the meantime.
      item.reject(new AppError("idempotency_key_in_use", "a request with this Idempotency-Key was in progress; retry"));
    } else if (existing.request_hash !== item.requestHash) {
      item.reject(
        new AppError("idempotency_key_reused", "this Idempotency-Key was used with a different request body"),
      );
    } else if (
      existing.unpublished &&
      !settler.has(existing.notification_id) &&
      Date.now() - existing.created_at.getTime() < IN_FLIGHT_MS
    ) {
      item.reject(
        new AppError("idempotency_key_in_use", "a request with this Idempotency-Key is in progress; retry later", {
          context: { retryAfterSeconds: 1 },
        }),
      );
    } else {
      // Done, or committed by a first request that never heard back: the sweep publishes those.
      item.resolve({ kind: "replayed", notificationId: existing.notification_id });
    }
  }
}
