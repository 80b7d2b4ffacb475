import { AppError } from "@notify/core";
import type { Database } from "@notify/db";
import { asDependencyError } from "../dependency.js";
import { contentProblems } from "./check-content.js";
import { readTemplate, sortVariants } from "./get-template.js";
import type { TemplateRequest, TemplateResponse } from "./schemas.js";

export type PutTemplateResult = { kind: "created" | "versioned" | "unchanged"; template: TemplateResponse };

const contentOf = (t: Pick<TemplateResponse, "default_locale" | "params" | "variants">) =>
  JSON.stringify([t.default_locale, [...t.params].sort(), sortVariants(t.variants)]);

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
  if (problems.length > 0) {
    throw new AppError("validation_failed", problems.map((p) => `${p.field}: ${p.message}`).join("; "), {
      fields: problems,
    });
  }
  const variants = sortVariants(input.variants);
  try {
    return await database.sql.begin(async (tx) => {
      const created = await tx`
        insert into templates (id, default_locale, latest_version) values (${templateId}, ${input.default_locale}, 0)
        on conflict (id) do nothing returning id`;
      const [head] = await tx<{ latest_version: number }[]>`
        select latest_version from templates where id = ${templateId} for update`;
      const latest = head?.latest_version ?? 0;
      if (latest > 0) {
        const current = await readTemplate(tx, templateId, latest);
        if (current && contentOf(current) === contentOf({ ...input, variants })) {
          return { kind: "unchanged", template: current } as const;
        }
      }
      const version = latest + 1;
      await tx`
        insert into template_versions (template_id, version, params, default_locale)
        values (${templateId}, ${version}, ${tx.json(input.params)}, ${input.default_locale})`;
      await tx`
        insert into template_variants (template_id, version, channel, locale, subject, body_template)
        select ${templateId}, ${version}, * from unnest(
          ${variants.map((v) => v.channel)}::text[], ${variants.map((v) => v.locale)}::text[],
          ${variants.map((v) => v.subject) as string[]}::text[], ${variants.map((v) => v.body_template)}::text[])`;
      await tx`
        update templates set latest_version = ${version}, default_locale = ${input.default_locale}, updated_at = now()
        where id = ${templateId}`;
      const template = await readTemplate(tx, templateId, version);
      if (!template) throw new Error(`template ${templateId} version ${version} vanished inside its transaction`);
      return { kind: created.length > 0 ? "created" : "versioned", template } as const;
    });
  } catch (error) {
    throw asDependencyError(error, "postgres");
  }
}
