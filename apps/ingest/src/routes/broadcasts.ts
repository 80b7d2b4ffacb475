import { validate } from "@notify/core";
import { limitBody, readJson } from "@notify/http";
import type { Hono } from "hono";
import type { AuthEnv } from "../auth/middleware.js";
import { createBroadcast } from "../broadcasts/create.js";
import { type BroadcastAction, changeBroadcast, getBroadcast } from "../broadcasts/progress.js";
import { BroadcastAccepted, BroadcastRequest, BroadcastView } from "../broadcasts/schemas.js";
import type { IngestDeps } from "../deps.js";
import { type Contract, contract } from "./contract.js";
import { parseIdempotencyKey } from "./notifications.js";

const broadcasts = (route: Omit<Contract, "tag" | "scope">) =>
  contract({ ...route, tag: "Broadcasts", scope: "broadcast" });

/**
 * Broadcasts, scope `broadcast`: one request reaches a whole audience, so it takes the scope
 * that manages audiences rather than the everyday `ingest`; a broadcast is its client's own.
 */
export function mountBroadcasts(
  v1: Hono<AuthEnv>,
  deps: Pick<IngestDeps, "database" | "templates" | "maxBodyBytes">,
): void {
  v1.post(
    "/broadcasts",
    broadcasts({
      summary: "Broadcast to an audience",
      description:
        "Always promotional. The processor expands it in batches into one notification per member (each with its own notification_id, preferences applied per recipient), resuming after a crash where it stopped: every member gets exactly one. Members added before the expansion reaches them are included.",
      body: BroadcastRequest,
      headers: [
        {
          name: "Idempotency-Key",
          required: true,
          description:
            "Required; a repeat with the same body returns the same broadcast (200, Idempotent-Replayed), another body is a 422.",
        },
      ],
      responses: {
        202: {
          description: "Accepted; expansion starts",
          schema: BroadcastAccepted,
          headers: { Location: "Its progress" },
        },
        200: {
          description: "The Idempotency-Key was used with the same body: the existing broadcast",
          schema: BroadcastAccepted,
          headers: { "Idempotent-Replayed": "true" },
        },
      },
      problems: [
        "validation_failed",
        "malformed_json",
        "idempotency_key_missing",
        "idempotency_key_invalid",
        "idempotency_key_reused",
        "unknown_template",
        "template_data_invalid",
        "payload_too_large",
        "unsupported_media_type",
      ],
    }),
    limitBody(deps.maxBodyBytes),
    async (c) => {
      const idempotencyKey = parseIdempotencyKey(c.req.header("idempotency-key"));
      const request = validate(BroadcastRequest, await readJson(c));
      const result = await createBroadcast(deps, { clientId: c.get("principal").clientId, idempotencyKey, request });
      c.header("location", `/api/v1/broadcasts/${result.broadcastId}`);
      if (result.kind === "replayed") {
        c.header("idempotent-replayed", "true");
        return c.json({ broadcast_id: result.broadcastId, status: result.status, total: result.total }, 200);
      }
      c.get("log").info({ broadcast_id: result.broadcastId, total: result.total }, "broadcast accepted");
      return c.json({ broadcast_id: result.broadcastId, status: "expanding", total: result.total }, 202);
    },
  );

  v1.get(
    "/broadcasts/:id",
    broadcasts({
      summary: "Read a broadcast's progress",
      description:
        "total (members when accepted), expanded (notifications created), and per recipient: delivered on at least one channel, failed (no delivery, a failed, bounced or expired channel), suppressed (every channel suppressed).",
      responses: { 200: { description: "Its progress", schema: BroadcastView } },
      problems: ["not_found"],
    }),
    async (c) => c.json(await getBroadcast(deps.database, c.get("principal").clientId, c.req.param("id"))),
  );

  const actions = {
    cancel: {
      summary: "Cancel a broadcast",
      description:
        "Stops the expansion between two batches; recipients already expanded keep their notifications. A paused broadcast can be cancelled too. Cancelling a finished broadcast changes nothing.",
    },
    pause: {
      summary: "Pause a broadcast",
      description:
        "Status paused: the batch being expanded finishes, no further one is taken until it is resumed; recipients already expanded keep their notifications. Pausing a broadcast that is not expanding (paused, expanded, cancelled) changes nothing.",
    },
    resume: {
      summary: "Resume a paused broadcast",
      description:
        "Status expanding again: the expansion goes on after the last recipient expanded, within the processor's poll interval. Resuming a broadcast that is not paused changes nothing.",
    },
  } as const;
  for (const [action, text] of Object.entries(actions) as Array<[BroadcastAction, (typeof actions)[BroadcastAction]]>) {
    v1.post(
      `/broadcasts/:id/${action}`,
      broadcasts({
        ...text,
        responses: { 200: { description: "Its progress", schema: BroadcastView } },
        problems: ["not_found"],
      }),
      async (c) => {
        const view = await changeBroadcast(deps.database, c.get("principal").clientId, c.req.param("id"), action);
        c.get("log").info(
          { broadcast_id: view.broadcast_id, status: view.status, expanded: view.expanded, action },
          "broadcast changed",
        );
        return c.json(view);
      },
    );
  }
}
