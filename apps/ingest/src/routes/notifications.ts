import { AppError, NotificationRequest } from "@notify/core";
import { limitBody, readJson, validate } from "@notify/http";
import type { Hono } from "hono";
import { type AuthEnv, requireScope } from "../auth/middleware.js";
import type { IngestDeps } from "../deps.js";
import { getNotification } from "../notifications/get.js";

/** Idempotency-Key (IETF draft): a Structured Field String; a bare token is accepted too. */
const IDEMPOTENCY_KEY = /^"?([\x21\x23-\x5b\x5d-\x7e]{1,255})"?$/;

export function parseIdempotencyKey(header: string | undefined): string {
  const value = header?.trim() ?? "";
  if (value === "") {
    throw new AppError(
      "idempotency_key_missing",
      "the Idempotency-Key header is required (the upstream event id, a UUID)",
    );
  }
  const match = IDEMPOTENCY_KEY.exec(value);
  const quoted = value.startsWith('"');
  if (!match || quoted !== value.endsWith('"') || (quoted && value.length < 3)) {
    throw new AppError("idempotency_key_invalid", "Idempotency-Key must be 1-255 printable characters, e.g. a UUID");
  }
  return match[1] as string;
}

export function mountNotifications(v1: Hono<AuthEnv>, deps: IngestDeps): void {
  v1.post("/notifications", limitBody(deps.maxBodyBytes), requireScope("ingest"), async (c) => {
    const idempotencyKey = parseIdempotencyKey(c.req.header("idempotency-key"));
    const request = validate(NotificationRequest, await readJson(c));
    const result = await deps.ingestor.create({ clientId: c.get("principal").clientId, idempotencyKey, request });
    if (result.kind === "replayed") {
      c.header("idempotent-replayed", "true");
      return c.json({ notification_id: result.notificationId, status: "accepted" }, 200);
    }
    c.header("location", `/api/v1/notifications/${result.notificationId}`);
    return c.json({ notification_id: result.notificationId, status: "accepted" }, 202);
  });

  v1.get("/notifications/:id", requireScope("read"), async (c) =>
    c.json(await getNotification(deps.database, c.get("principal").clientId, c.req.param("id"))),
  );
}
