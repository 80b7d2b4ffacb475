import { AppError, type MaybePromise, newId } from "@notify/core";
import { type Database, insertBroadcast } from "@notify/db";
import { toAppError } from "@notify/http";
import { requestHash as hashOf } from "../notifications/canonical-json.js";
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
  deps: { database: Database; templates: (id: string) => MaybePromise<TemplateInfo | null> },
  input: { clientId: string; idempotencyKey: string; request: BroadcastRequest },
): Promise<BroadcastResult> {
  const { request } = input;
  const requestHash = hashOf(request);
  try {
    const template = checkTemplate(await deps.templates(request.template_id), request.template_id, request.data);
    const stored = await insertBroadcast(deps.database, {
      id: newId(),
      clientId: input.clientId,
      idempotencyKey: input.idempotencyKey,
      requestHash,
      audienceId: request.audience_id,
      category: request.category,
      templateId: request.template_id,
      templateVersion: template.version,
      channels: request.channels ?? null,
      data: request.data,
    });
    if (stored.kind === "inserted") return { kind: "accepted", broadcastId: stored.id, total: stored.total };
    if (stored.kind === "no_audience") {
      throw new AppError("validation_failed", `audience ${request.audience_id} does not exist`, {
        fields: [{ field: "audience_id", message: "unknown audience" }],
      });
    }
    if (stored.requestHash !== requestHash) {
      throw new AppError("idempotency_key_reused", "this Idempotency-Key was used for another broadcast");
    }
    return { kind: "replayed", broadcastId: stored.id, total: stored.total, status: stored.status };
  } catch (error) {
    throw toAppError(error);
  }
}
