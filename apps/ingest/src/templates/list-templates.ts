import { type Database, listTemplateSummaries } from "@notify/db";
import { toAppError } from "@notify/http";
import type { TemplateSummary } from "./schemas.js";

/** GET /api/v1/templates: an admin list, offset-paginated by template id. */
export async function listTemplates(
  database: Database,
  page: { page: number; pageSize: number },
): Promise<{ data: TemplateSummary[]; total_count: number }> {
  try {
    return await listTemplateSummaries(database, page);
  } catch (error) {
    throw toAppError(error);
  }
}
