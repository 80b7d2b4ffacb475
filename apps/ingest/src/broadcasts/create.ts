import { createHash } from "node:crypto";
import { AppError, newId } from "@notify/core";
import type { Database } from "@notify/db";
import { asDependencyError } from "../dependency.js";
import { canonicalJson } from "../notifications/create.js";
import { checkTemplate, type TemplateInfo } from "../notifications/templates.js";
import type { BroadcastRequest } from "./schemas.js";

export type BroadcastResult =
  | { kind: "accepted"; broadcastId: string; total: number }
  | { kind: "replayed"; broadcastId: string; total: number; status: string };

/**
 * Stores a broadcast for the processor's expander to walk its audience. Idempotent per
 * (client, Idempotency-Key) for as long as the broadcast exists: a repeat with the same body
 * gets the same broadcast, another body is a 422. Nothing is enqueued here, so there is no
 * publish to wait for; expansion starts within the expander's poll interval.
 */
export async function createBroadcast(
  deps: { database: Database; templates: (id: string) => Promise<TemplateInfo | null> },
  input: { clientId: string; idempotencyKey: string; request: BroadcastRequest },
): Promise<BroadcastResult> {
  const { request } = input;
  const requestHash = createHash("sha256").update(canonicalJson(request)).digest("hex");
  try {
    const template = checkTemplate(await deps.templates(request.template_id), request.template_id, request.data);
    const { sql } = deps.database;
    const id = newId();
    const [inserted] = await sql<{ id: string; total: number }[]>`
      insert into broadcasts (id, client_id, dedup_key, request_hash, audience_id, category, template_id,
        template_version, requested_channels, data, status, total)
      select ${id}, ${input.clientId}, ${input.idempotencyKey}, ${requestHash}, a.id, ${request.category},
        ${request.template_id}, ${template.version}, ${request.channels ?? null}::text[], ${sql.json(request.data as never)},
        'expanding', (select count(*) from audience_members m where m.audience_id = a.id)
      from audiences a where a.id = ${request.audience_id}
      on conflict (client_id, dedup_key) do nothing
      returning id, total::float8 as total`;
    if (inserted) return { kind: "accepted", broadcastId: inserted.id, total: Number(inserted.total) };
    const [existing] = await sql<{ id: string; request_hash: string; total: number; status: string }[]>`
      select id, request_hash, total::float8 as total, status from broadcasts
      where client_id = ${input.clientId} and dedup_key = ${input.idempotencyKey}`;
    if (!existing) {
      throw new AppError("validation_failed", `audience ${request.audience_id} does not exist`, {
        fields: [{ field: "audience_id", message: "unknown audience" }],
      });
    }
    if (existing.request_hash !== requestHash) {
      throw new AppError("idempotency_key_reused", "this Idempotency-Key was used for another broadcast");
    }
    return { kind: "replayed", broadcastId: existing.id, total: Number(existing.total), status: existing.status };
  } catch (error) {
    throw asDependencyError(error, "postgres");
  }
}
