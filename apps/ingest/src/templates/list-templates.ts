import type { Database } from "@notify/db";
import { asDependencyError } from "../dependency.js";
import type { TemplateSummary } from "./schemas.js";

/** GET /api/v1/templates: an admin list, offset-paginated by template id. */
export async function listTemplates(
  database: Database,
  page: { page: number; pageSize: number },
): Promise<{ data: TemplateSummary[]; total_count: number }> {
  try {
    const rows = await database.sql<
      {
        id: string;
        latest_version: number;
        default_locale: string;
        created_at: Date;
        updated_at: Date;
        total: number;
      }[]
    >`
      select id, latest_version, default_locale, created_at, updated_at, count(*) over ()::int as total
      from templates
      order by id limit ${page.pageSize} offset ${(page.page - 1) * page.pageSize}`;
    const total = rows[0]?.total ?? Number((await database.sql`select count(*)::int as n from templates`)[0]?.n ?? 0);
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
  } catch (error) {
    throw asDependencyError(error, "postgres");
  }
}
