import { AppError, missingParams } from "@notify/core";
import { type Database, readLatestTemplateParams } from "@notify/db";
import { LRUCache } from "lru-cache";

export interface TemplateInfo {
  id: string;
  version: number;
  params: string[];
}

/**
 * Declared parameters of a template's latest version, cached for a few seconds: every POST
 * checks its data against them, and templates change rarely.
 */
export function createTemplateLookup(database: Database, ttlMs = 5000) {
  // Bounded: template ids come from requests, and an unknown one is cached (as null) too.
  const cache = new LRUCache<string, { value: TemplateInfo | null }>({ max: 10_000, ttl: Math.max(1, ttlMs) });
  return async (templateId: string): Promise<TemplateInfo | null> => {
    const hit = ttlMs > 0 ? cache.get(templateId) : undefined;
    if (hit !== undefined) return hit.value;
    const row = await readLatestTemplateParams(database, templateId);
    const value = row ? { id: templateId, version: row.version, params: row.params } : null;
    // lru-cache reads a ttl of 0 as "forever"; here it means no cache.
    if (ttlMs > 0) cache.set(templateId, { value });
    return value;
  };
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
