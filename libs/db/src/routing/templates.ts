import type { Channel } from "@notify/core";
import type { Database } from "../pool.js";
import type { RowPick } from "../rows.js";
import type { templateVariants } from "../schema/index.js";

/** The latest version of a template, null when there is no such template. */
export async function readLatestTemplateVersion(database: Database, templateId: string): Promise<number | null> {
  const [row] = await database.sql<{ latest_version: number }[]>`
    select latest_version from templates where id = ${templateId}`;
  return row ? row.latest_version : null;
}

export type RenderVariantRow = Omit<
  RowPick<typeof templateVariants, "channel" | "locale" | "subject" | "body_template">,
  "channel"
> & { channel: Channel };

/** What rendering needs of one template version; null when the version does not exist (yet). */
export interface RenderVersionRow {
  params: string[];
  /** The version's own default locale, else the template's. */
  default_locale: string;
  variants: RenderVariantRow[];
}

export async function readTemplateVersionForRender(
  database: Database,
  templateId: string,
  version: number,
): Promise<RenderVersionRow | null> {
  const [head] = await database.sql<{ params: string[]; default_locale: string }[]>`
    select v.params, coalesce(v.default_locale, t.default_locale) as default_locale
    from template_versions v join templates t on t.id = v.template_id
    where v.template_id = ${templateId} and v.version = ${version}`;
  if (!head) return null;
  const variants = await database.sql<RenderVariantRow[]>`
    select channel, locale, subject, body_template from template_variants where template_id = ${templateId} and version = ${version}`;
  return { params: head.params, default_locale: head.default_locale, variants: [...variants] };
}
