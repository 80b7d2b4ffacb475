import { AppError } from "@notify/core";
import { type Database, writeTemplateVersion } from "@notify/db";
import { toAppError } from "@notify/http";
import { contentProblems } from "./check-content.js";
import { sortVariants, toTemplateResponse } from "./get-template.js";
import type { TemplateRequest, TemplateResponse } from "./schemas.js";

export type PutTemplateResult = { kind: "created" | "versioned" | "unchanged"; template: TemplateResponse };

const contentOf = (t: Pick<TemplateResponse, "default_locale" | "params" | "ttl_seconds" | "variants">) =>
  JSON.stringify([t.default_locale, [...t.params].sort(), t.ttl_seconds, sortVariants(t.variants)]);

/**
 * PUT /api/v1/templates/{id}: writes the next immutable version (version 1 creates the
 * template). Versions are never edited, so a notification rendered from its pinned version
 * reads what was current when it was accepted. Repeating the latest content writes nothing,
 * which keeps PUT idempotent. Concurrent writers are serialised on the template row.
 */
export async function putTemplate(
  database: Database,
  templateId: string,
  input: TemplateRequest,
): Promise<PutTemplateResult> {
  const problems = contentProblems(input);
  if (problems.fields.length > 0) {
    // A subject or body outside the template subset is content the service will not run: 422,
    // every problem of the request named (with line and column for the template ones).
    throw new AppError(
      problems.template ? "template_invalid" : "validation_failed",
      problems.fields.map((p) => `${p.field}: ${p.message}`).join("; "),
      { fields: problems.fields },
    );
  }
  const content = {
    default_locale: input.default_locale,
    params: input.params,
    ttl_seconds: input.ttl_seconds,
    variants: sortVariants(input.variants),
  };
  const wanted = contentOf(content);
  try {
    const written = await writeTemplateVersion(database, templateId, content, (latest) => contentOf(latest) === wanted);
    return { kind: written.kind, template: toTemplateResponse(written.template) };
  } catch (error) {
    throw toAppError(error);
  }
}
