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

/** A first request still publishing holds its key this long; a retry meanwhile gets 409. */
const IN_FLIGHT_MS = 30_000;

/**
 * Accepts a notification (spec rule 1, invariant 1): checks the template, commits the row,
 * publishes to the lane and only then reports it accepted. If the publish fails the row is
 * removed again, so a 503 leaves nothing behind; if even that fails, the recovery sweep
 * publishes the row later and a retry with the same key finds it.
 */
export async function createNotification(
  deps: CreateDeps,
  input: { clientId: string; idempotencyKey: string; request: NotificationRequest },
): Promise<CreateResult> {
  const { request, clientId, idempotencyKey } = input;
  const requestHash = createHash("sha256").update(canonicalJson(request)).digest("hex");

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
  const partition = partitionOf(request.user_id, deps.bus.naming.partitions);
  const { sql } = deps.database;
  let createdAt: Date;
  try {
    const inserted = await sql<{ created_at: Date }[]>`
      insert into notifications (id, client_id, user_id, category, template_id, priority, requested_channels, data, dedup_key, request_hash, partition)
      values (${id}, ${clientId}, ${request.user_id}, ${request.category}, ${request.template_id}, ${request.priority},
              ${request.channels ?? null}, ${sql.json(request.data as never)}, ${idempotencyKey}, ${requestHash}, ${partition})
      on conflict (client_id, dedup_key) do nothing
      returning created_at`;
    if (inserted.length === 0) return await replay(deps, clientId, idempotencyKey, requestHash);
    createdAt = (inserted[0] as { created_at: Date }).created_at;
  } catch (error) {
    throw asDependencyError(error, "postgres");
  }

  const message: LaneMessage = {
    notification_id: id,
    client_id: clientId,
    user_id: request.user_id,
    category: request.category,
    template_id: request.template_id,
    priority: request.priority,
    channels: request.channels ?? null,
    data: request.data,
    created_at: createdAt.toISOString(),
  };
  try {
    await deps.bus.publish(deps.bus.subjects.lane(request.priority, partition), message, id);
  } catch (error) {
    await sql`delete from notifications where id = ${id}`.catch((cleanupError: unknown) => {
      deps.log.warn(
        { err: cleanupError, notification_id: id },
        "compensating delete failed; the recovery sweep will publish",
      );
    });
    throw asDependencyError(error, "nats");
  }
  // Best effort: a row left unmarked is only republished by the sweep, deduplicated by msg id.
  await sql`update notifications set published_at = now() where id = ${id}`.catch((error: unknown) => {
    deps.log.warn({ err: error, notification_id: id }, "marking published failed");
  });
  return { kind: "accepted", notificationId: id };
}

async function replay(deps: CreateDeps, clientId: string, key: string, requestHash: string): Promise<CreateResult> {
  const [existing] = await deps.database.sql<
    { id: string; request_hash: string; published_at: Date | null; created_at: Date }[]
  >`
    select id, request_hash, published_at, created_at from notifications where client_id = ${clientId} and dedup_key = ${key}`;
  if (!existing) {
    // The first request was rolled back between our insert and this read: let the client retry.
    throw new AppError("idempotency_key_in_use", "a request with this Idempotency-Key is in progress; retry later");
  }
  if (existing.request_hash !== requestHash) {
    throw new AppError("idempotency_key_reused", "this Idempotency-Key was used with a different request body");
  }
  if (existing.published_at === null && Date.now() - existing.created_at.getTime() < IN_FLIGHT_MS) {
    throw new AppError("idempotency_key_in_use", "a request with this Idempotency-Key is in progress; retry later");
  }
  return { kind: "replayed", notificationId: existing.id };
}
