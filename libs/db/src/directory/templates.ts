import type { Channel } from "@notify/core";
import type { Database, Sql } from "../pool.js";
import type { RowPick } from "../rows.js";
import type { templates, templateVariants, templateVersions } from "../schema/index.js";

// Templates and their immutable versions: the ingest API's reads and writes.

export interface TemplateVariant {
  channel: Channel;
  locale: string;
  subject: string | null;
  body_template: string;
}

/** One version of a template as the API shows it (variants in no particular order). */
export interface TemplateVersionRecord {
  template_id: string;
  version: number;
  latest_version: number;
  default_locale: string;
  params: string[];
  /** Time to live of a notification without a deliver_by of its own; null: none. */
  ttl_seconds: number | null;
  variants: TemplateVariant[];
  created_at: string;
}

/** What a PUT writes as the next version. */
export interface TemplateContent {
  default_locale: string;
  params: string[];
  ttl_seconds: number | null;
  variants: TemplateVariant[];
}

/** A transaction's handle, so that a read can run inside one. */
type Tx = Parameters<Parameters<Sql["begin"]>[1]>[0];

type VersionRow = RowPick<typeof templateVersions, "version" | "params" | "ttl_seconds" | "created_at"> &
  RowPick<typeof templates, "latest_version" | "default_locale">;
type VariantRow = Omit<
  RowPick<typeof templateVariants, "channel" | "locale" | "subject" | "body_template">,
  "channel"
> & {
  channel: Channel;
};

/** One version; `version` null reads the latest. Null when there is no such template or version. */
async function readVersion(
  sql: Sql | Tx,
  templateId: string,
  version: number | null,
): Promise<TemplateVersionRecord | null> {
  const [row] = await sql<VersionRow[]>`
    select v.version, t.latest_version, coalesce(v.default_locale, t.default_locale) as default_locale, v.params, v.ttl_seconds, v.created_at
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
    ttl_seconds: row.ttl_seconds,
    variants: variants.map(({ channel, locale, subject, body_template }) => ({
      channel,
      locale,
      subject,
      body_template,
    })),
    created_at: row.created_at.toISOString(),
  };
}

/** One version of a template; `version` null reads the latest. */
export async function readTemplateVersion(
  database: Database,
  templateId: string,
  version: number | null,
): Promise<TemplateVersionRecord | null> {
  return readVersion(database.sql, templateId, version);
}

export type WrittenTemplate = { kind: "created" | "versioned" | "unchanged"; template: TemplateVersionRecord };

/**
 * Writes the next immutable version of a template (version 1 creates it), unless
 * `sameContent` finds the latest version equal to what is being written: then nothing is
 * written ("unchanged"). Concurrent writers are serialised on the template row, so the
 * comparison and the write see the same latest version.
 */
export async function writeTemplateVersion(
  database: Database,
  templateId: string,
  content: TemplateContent,
  sameContent: (latest: TemplateVersionRecord) => boolean,
): Promise<WrittenTemplate> {
  const { variants } = content;
  return database.sql.begin(async (tx) => {
    const created = await tx`
      insert into templates (id, default_locale, latest_version) values (${templateId}, ${content.default_locale}, 0)
      on conflict (id) do nothing returning id`;
    const [head] = await tx<RowPick<typeof templates, "latest_version">[]>`
      select latest_version from templates where id = ${templateId} for update`;
    const latest = head?.latest_version ?? 0;
    if (latest > 0) {
      const current = await readVersion(tx, templateId, latest);
      if (current && sameContent(current)) return { kind: "unchanged", template: current } as const;
    }
    const version = latest + 1;
    await tx`
      insert into template_versions (template_id, version, params, default_locale, ttl_seconds)
      values (${templateId}, ${version}, ${tx.json(content.params)}, ${content.default_locale}, ${content.ttl_seconds})`;
    await tx`
      insert into template_variants (template_id, version, channel, locale, subject, body_template)
      select ${templateId}, ${version}, * from unnest(
        ${variants.map((v) => v.channel)}::text[], ${variants.map((v) => v.locale)}::text[],
        ${variants.map((v) => v.subject) as string[]}::text[], ${variants.map((v) => v.body_template)}::text[])`;
    await tx`
      update templates set latest_version = ${version}, default_locale = ${content.default_locale}, updated_at = now()
      where id = ${templateId}`;
    const template = await readVersion(tx, templateId, version);
    if (!template) throw new Error(`template ${templateId} version ${version} vanished inside its transaction`);
    return { kind: created.length > 0 ? "created" : "versioned", template } as const;
  });
}

export interface TemplateSummaryRecord {
  template_id: string;
  latest_version: number;
  default_locale: string;
  created_at: string;
  updated_at: string;
}

/** Templates by id, offset-paginated; page from 1. */
export async function listTemplateSummaries(
  database: Database,
  page: { page: number; pageSize: number },
): Promise<{ data: TemplateSummaryRecord[]; total_count: number }> {
  const { sql } = database;
  const rows = await sql<
    Array<
      RowPick<typeof templates, "id" | "latest_version" | "default_locale" | "created_at" | "updated_at"> & {
        total: number;
      }
    >
  >`
    select id, latest_version, default_locale, created_at, updated_at, count(*) over ()::int as total
    from templates
    order by id limit ${page.pageSize} offset ${(page.page - 1) * page.pageSize}`;
  // A page past the end has no row to carry the window count.
  const total =
    rows[0]?.total ?? Number((await sql<{ n: number }[]>`select count(*)::int as n from templates`)[0]?.n ?? 0);
  return {
    data: rows.map((r) => ({
      template_id: r.id,
      latest_version: r.latest_version,
      default_locale: r.default_locale,
      created_at: r.created_at.toISOString(),
      updated_at: r.updated_at.toISOString(),
    })),
    total_count: total,
  };
}
