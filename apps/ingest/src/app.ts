import type { Bus } from "@notify/bus";
import { AppError, type FieldError, NotificationRequest } from "@notify/core";
import type { Database } from "@notify/db";
import { mountHealth, newApp } from "@notify/http";
import type { Logger } from "@notify/log";
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import * as v from "valibot";
import type { Principal } from "./auth/api-keys.js";
import { type AuthEnv, requireKey } from "./auth/middleware.js";
import { createNotification } from "./notifications/create.js";
import { getNotification } from "./notifications/get.js";
import type { TemplateInfo } from "./notifications/templates.js";

export interface IngestDeps {
  database: Database;
  bus: Bus;
  log: Logger;
  lookupKey: (key: string) => Promise<Principal | null>;
  templates: (id: string) => Promise<TemplateInfo | null>;
  maxBodyBytes: number;
  isStopping: () => boolean;
}

/** Idempotency-Key (IETF draft): a Structured Field String; a bare token is accepted too. */
const IDEMPOTENCY_KEY = /^"?([\x21\x23-\x5b\x5d-\x7e]{1,255})"?$/;

export function parseIdempotencyKey(header: string | undefined): string {
  if (header === undefined || header.trim() === "") {
    throw new AppError(
      "idempotency_key_missing",
      "the Idempotency-Key header is required (the upstream event id, a UUID)",
    );
  }
  const match = IDEMPOTENCY_KEY.exec(header.trim());
  const quoted = header.trim().startsWith('"');
  if (!match || quoted !== header.trim().endsWith('"') || (quoted && header.trim().length < 3)) {
    throw new AppError("idempotency_key_invalid", "Idempotency-Key must be 1-255 printable characters, e.g. a UUID");
  }
  return match[1] as string;
}

/** Reads a JSON body: 415 for another media type, 400 for malformed JSON. */
export async function readJson(c: Context): Promise<unknown> {
  const type = c.req.header("content-type") ?? "";
  if (!/^application\/([a-z0-9.+-]+\+)?json(\s*;.*)?$/i.test(type.trim())) {
    throw new AppError("unsupported_media_type", "send the body as application/json");
  }
  const text = await c.req.text();
  try {
    return JSON.parse(text);
  } catch {
    throw new AppError("malformed_json", "the request body is not valid JSON");
  }
}

export function validate<S extends v.GenericSchema>(schema: S, input: unknown): v.InferOutput<S> {
  const result = v.safeParse(schema, input, { abortEarly: false });
  if (result.success) return result.output;
  const fields: FieldError[] = result.issues.map((issue) => ({
    field: v.getDotPath(issue) ?? (issue.type === "strict_object" ? String(issue.input ?? "") : "(body)"),
    message:
      issue.type === "strict_object" ? `unknown field "${String(v.getDotPath(issue) ?? issue.input)}"` : issue.message,
  }));
  throw new AppError("validation_failed", fields.map((f) => `${f.field}: ${f.message}`).join("; "), { fields });
}

export function createApp(deps: IngestDeps) {
  const app = newApp(deps.log);
  mountHealth(app, { postgres: () => deps.database.ping(), nats: () => deps.bus.isConnected() }, deps.isStopping);

  // Every route of the public API lives under the version prefix (spec: Versioning).
  const v1 = new Hono<AuthEnv>();
  v1.post(
    "/notifications",
    bodyLimit({
      maxSize: deps.maxBodyBytes,
      onError: () => {
        throw new AppError("payload_too_large", `the request body exceeds ${deps.maxBodyBytes} bytes`);
      },
    }),
    requireKey(deps.lookupKey, "ingest"),
    async (c) => {
      const idempotencyKey = parseIdempotencyKey(c.req.header("idempotency-key"));
      const request = validate(NotificationRequest, await readJson(c));
      const result = await createNotification(deps, { clientId: c.var.principal.clientId, idempotencyKey, request });
      if (result.kind === "replayed") {
        c.header("idempotent-replayed", "true");
        return c.json({ notification_id: result.notificationId, status: "accepted" }, 200);
      }
      c.header("location", `/api/v1/notifications/${result.notificationId}`);
      return c.json({ notification_id: result.notificationId, status: "accepted" }, 202);
    },
  );
  v1.get("/notifications/:id", requireKey(deps.lookupKey, "read"), async (c) =>
    c.json(await getNotification(deps.database, c.var.principal.clientId, c.req.param("id"))),
  );
  app.route("/api/v1", v1);
  return app;
}
