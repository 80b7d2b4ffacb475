import { AppError, type MaybePromise, missingParams } from "@notify/core";
import { type Database, readLatestTemplateParams } from "@notify/db";
import { createForgettableCache } from "@notify/http";

export interface TemplateInfo {
  id: string;
  version: number;
  params: string[];
  /** A notification without a deliver_by of its own expires this long after it is accepted. */
  ttlSeconds?: number | null;
}

export interface TemplateLookup {
  (templateId: string): MaybePromise<TemplateInfo | null>;
  /** Drops what is cached of a template that got a version here or on another instance. */
  forget(templateId: string): void;
}

/**
 * Declared parameters of a template's latest version, cached for a few seconds: every POST
 * checks its data against them, and templates change rarely. A new version is announced on
 * NATS and every instance forgets its copy at once; the TTL bounds a missed announcement.
 */
export function createTemplateLookup(database: Database, ttlMs = 5000): TemplateLookup {
  // Bounded: template ids come from requests, and an unknown one is cached (as null) too.
  const cache = createForgettableCache<TemplateInfo | null>({ max: 10_000, ttlMs });
  // A cached template is answered at once (no promise): every POST asks.
  const lookup = (templateId: string): MaybePromise<TemplateInfo | null> => {
    const hit = cache.get(templateId);
    if (hit !== undefined) return hit;
    return cache.load(templateId, async () => {
      const row = await readLatestTemplateParams(database, templateId);
      return row ? { id: templateId, version: row.version, params: row.params, ttlSeconds: row.ttl_seconds } : null;
    });
  };
  return Object.assign(lookup, { forget: (templateId: string) => cache.forget(templateId) });
}

/**
 * The template a request names, checked against the request's data: 400 unknown_template when
 * it does not exist, 400 template_data_invalid naming every missing parameter.
 */
export function checkTemplate(
  template: TemplateInfo | null,
  templateId: string,
  data: Record<string, unknown>,
): TemplateInfo {
  if (!template) {
    throw new AppError("unknown_template", `template "${templateId}" does not exist`, {
      fields: [{ field: "template_id", message: "unknown template" }],
    });
  }
  const missing = missingParams(template.params, data);
  if (missing.length > 0) {
    throw new AppError("template_data_invalid", `data is missing ${missing.map((m) => m.field).join(", ")}`, {
      fields: missing,
    });
  }
  return template;
}
