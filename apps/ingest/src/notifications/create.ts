import { createHash } from "node:crypto";
import type { Bus } from "@notify/bus";
import { AppError, type LaneMessage, missingParams, type NotificationRequest, newId, partitionOf } from "@notify/core";
import type { Database } from "@notify/db";
import type { Logger } from "@notify/log";
import { asDependencyError } from "../dependency.js";
import type { TemplateInfo } from "./templates.js";

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
  state: "in_flight" | "done";
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
 * out together, and one statement marks them published. Each caller still hears 202 only
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
  const maxConcurrent = options.maxConcurrentBatches ?? 4;
  const queue: Pending[] = [];
  const active = new Set<Promise<void>>();
  const marker = createPublishedMarker(deps);

  const pump = () => {
    while (active.size < maxConcurrent && queue.length > 0) {
      const batch = queue.splice(0, maxBatch);
      const run: Promise<void> = flush(deps, marker, batch)
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
      let template: TemplateInfo | null;
      try {
        template = await deps.templates(request.template_id);
      } catch (error) {
        throw asDependencyError(error, "postgres");
      }
      if (!template) {
        throw new AppError("unknown_template", `template "${request.template_id}" does not exist`, {
          fields: [{ field: "template_id", message: "unknown template" }],
        });
      }
      const missing = missingParams(template.params, request.data);
      if (missing.length > 0) {
        throw new AppError("template_data_invalid", `data is missing ${missing.map((m) => m.field).join(", ")}`, {
          fields: missing,
        });
      }
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
      await marker.stop();
    },
  };
}

async function flush(deps: CreateDeps, marker: PublishedMarker, batch: Pending[]): Promise<void> {
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

  const column = <T>(pick: (p: Pending) => T) => first.map(pick);
  const inserted = await sql<{ id: string; created_at: Date }[]>`
    with input as (
      select * from unnest(
        ${column((p) => p.message.notification_id)}::text[], ${column((p) => p.input.clientId)}::text[],
        ${column((p) => p.input.idempotencyKey)}::text[], ${column((p) => p.requestHash)}::text[],
        ${column((p) => p.message.user_id)}::text[], ${column((p) => p.message.category)}::text[],
        ${column((p) => p.message.template_id)}::text[], ${column((p) => p.message.template_version ?? null) as number[]}::int[],
        ${column((p) => p.message.priority)}::text[],
        ${column((p) => (p.message.channels ? JSON.stringify(p.message.channels) : null)) as string[]}::text[],
        ${column((p) => JSON.stringify(p.message.data))}::text[], ${column((p) => p.partition)}::int[]
      ) as i(id, client_id, key, request_hash, user_id, category, template_id, template_version, priority, channels, data, partition)
    ),
    claimed as (
      insert into idempotency_keys (client_id, key, request_hash, notification_id, state, created_at)
      select client_id, key, request_hash, id, 'in_flight', now() from input
      on conflict (client_id, key) do update
        set request_hash = excluded.request_hash, notification_id = excluded.notification_id, state = 'in_flight', created_at = now()
        where idempotency_keys.created_at < now() - make_interval(hours => ${DEDUP_WINDOW_HOURS})
      returning notification_id
    )
    insert into notifications (id, client_id, user_id, category, template_id, template_version, priority, requested_channels, data, dedup_key, request_hash, partition)
    select id, client_id, user_id, category, template_id, template_version, priority,
           case when channels is null then null else array(select jsonb_array_elements_text(channels::jsonb)) end,
           data::jsonb, key, request_hash, partition
    from input where id in (select notification_id from claimed)
    returning id, created_at`;

  const createdAt = new Map(inserted.map((row) => [row.id, row.created_at.toISOString()]));
  const claimed = first.filter((p) => createdAt.has(p.message.notification_id));
  const unclaimed = [...first.filter((p) => !createdAt.has(p.message.notification_id)), ...duplicates];

  const published: string[] = [];
  const failed: string[] = [];
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

  marker.add(published);
  if (failed.length > 0) {
    await sql`
      with removed as (delete from notifications where id = any(${failed}) returning id)
      delete from idempotency_keys where notification_id in (select id from removed)`.catch((error: unknown) => {
      deps.log.warn(
        { err: error, count: failed.length },
        "compensating delete failed; the recovery sweep will publish",
      );
    });
  }
  // Answered only now, so that a 503 client retrying at once finds its key released.
  for (const { item, error } of failures) item.reject(error);
  const ok = new Set(published);
  for (const item of claimed) {
    if (ok.has(item.message.notification_id))
      item.resolve({ kind: "accepted", notificationId: item.message.notification_id });
  }
  if (unclaimed.length > 0) await resolveExisting(deps, marker, unclaimed);
}

interface PublishedMarker {
  add(ids: string[]): void;
  /** Published here, and its mark not yet written. */
  has(id: string): boolean;
  stop(): Promise<void>;
}

/**
 * Marks published rows (and their idempotency records done) off the request path, many at a
 * time, without waiting for the WAL flush: a mark lost in a crash only makes the recovery
 * sweep publish the row again, which JetStream deduplicates by msg id. This keeps one commit,
 * the row's own, between a request and its 202.
 */
function createPublishedMarker(deps: CreateDeps, intervalMs = 20): PublishedMarker {
  let pending: string[] = [];
  let writing = new Set<string>();
  let running: Promise<void> = Promise.resolve();
  const mark = async () => {
    const ids = pending;
    pending = [];
    if (ids.length === 0) return;
    writing = new Set(ids);
    await deps.database.sql
      .begin(async (tx) => {
        await tx`set local synchronous_commit = off`;
        await tx`update notifications set published_at = now() where id = any(${ids})`;
        await tx`update idempotency_keys set state = 'done' where notification_id = any(${ids})`;
      })
      .catch((error: unknown) =>
        deps.log.warn({ err: error, count: ids.length }, "marking published failed; the sweep will republish"),
      );
    writing = new Set();
  };
  const timer = setInterval(() => {
    running = running.then(mark);
  }, intervalMs);
  timer.unref();
  return {
    add(ids) {
      for (const id of ids) pending.push(id);
    },
    has: (id) => writing.has(id) || pending.includes(id),
    async stop() {
      clearInterval(timer);
      running = running.then(mark);
      await running;
    },
  };
}

/** Requests whose key was already claimed: a replay (200), a reuse (422) or in flight (409). */
async function resolveExisting(deps: CreateDeps, marker: PublishedMarker, items: Pending[]): Promise<void> {
  const rows = await deps.database.sql<ExistingKey[]>`
    select k.client_id, k.key, k.request_hash, k.notification_id, k.state, k.created_at
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
      existing.state === "in_flight" &&
      !marker.has(existing.notification_id) &&
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
