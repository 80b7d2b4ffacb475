import { AppError, CHANNELS, type Channel } from "@notify/core";
import type { Database, Sql } from "@notify/db";
import { asDependencyError } from "../dependency.js";
import type { TemplateResponse } from "./schemas.js";

interface VersionRow {
  version: number;
  latest_version: number;
  default_locale: string;
  params: string[];
  created_at: Date;
}
interface VariantRow {
  channel: Channel;
  locale: string;
  subject: string | null;
  body_template: string;
}

/** A transaction's handle, so that a read can run inside one. */
type Tx = Parameters<Parameters<Sql["begin"]>[1]>[0];

/** Variants in a stable order (channel order, then locale), so equal content reads equal. */
export const sortVariants = <T extends { channel: Channel; locale: string }>(variants: readonly T[]): T[] =>
  [...variants].sort(
    (a, b) =>
      CHANNELS.indexOf(a.channel) - CHANNELS.indexOf(b.channel) || (a.locale < b.locale ? -1 : +(a.locale > b.locale)),
  );

/** One version as the API shows it; `version` null reads the latest. Used inside transactions too. */
export async function readTemplate(
  sql: Sql | Tx,
  templateId: string,
  version: number | null,
): Promise<TemplateResponse | null> {
  const [row] = await sql<VersionRow[]>`
    select v.version, t.latest_version, coalesce(v.default_locale, t.default_locale) as default_locale, v.params, v.created_at
    from templates t join template_versions v on v.template_id = t.id and v.version = coalesce(${version}::int, t.latest_version)
    where t.id = ${templateId}`;
  if (!row) return null;
  const variants = await sql<VariantRow[]>`
    select channel, locale, subject, body_template from template_variants
    where template_id = ${templateId} and version = ${row.version}`;
  return {
    template_id: templateId,
    version: row.version,
    latest_version: row.latest_version,
    default_locale: row.default_locale,
    params: row.params,
    variants: sortVariants(variants).map(({ channel, locale, subject, body_template }) => ({
      channel,
      locale,
      subject,
      body_template,
    })),
    created_at: row.created_at.toISOString(),
  };
}

/** GET /api/v1/templates/{id} (latest) and /templates/{id}/versions/{version}. */
export async function getTemplate(database: Database, templateId: string, version: number | null) {
  let found: TemplateResponse | null;
  try {
    found = await readTemplate(database.sql, templateId, version);
  } catch (error) {
    throw asDependencyError(error, "postgres");
  }
  if (!found) {
    throw new AppError(
      "not_found",
      version === null
        ? `template "${templateId}" does not exist`
        : `template "${templateId}" has no version ${version}`,
    );
  }
  return found;
}
