import type { Database } from "../pool.js";
import type { Row } from "../rows.js";
import type { templateVersions } from "../schema/index.js";

/**
 * The latest version of a template and the data parameters it declares: what ingest checks an
 * accepted notification's data against, the version it renders and its time to live.
 */
export type LatestTemplateParams = Pick<Row<typeof templateVersions>, "version" | "params" | "ttl_seconds">;

/** Null when the template does not exist. */
export async function readLatestTemplateParams(
  database: Database,
  templateId: string,
): Promise<LatestTemplateParams | null> {
  const [row] = await database.sql<LatestTemplateParams[]>`
    select v.version, v.params, v.ttl_seconds from templates t
    join template_versions v on v.template_id = t.id and v.version = t.latest_version
    where t.id = ${templateId}`;
  return row ?? null;
}
