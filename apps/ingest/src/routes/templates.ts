import { limitBody, readJson, validate } from "@notify/http";
import type { Hono } from "hono";
import { type AuthEnv, requireScope } from "../auth/middleware.js";
import type { IngestDeps } from "../deps.js";
import { getTemplate } from "../templates/get-template.js";
import { listTemplates } from "../templates/list-templates.js";
import { putTemplate } from "../templates/put-template.js";
import {
  checkBodyTemplateId,
  ListTemplatesQuery,
  parseTemplateIdParam,
  parseVersionParam,
  TemplateRequest,
} from "../templates/schemas.js";

/**
 * Templates, scope `admin`: an eta template is code that the processor runs, so only an
 * operator's key may write one; reading them is kept to the same keys.
 */
export function mountTemplates(
  v1: Hono<AuthEnv>,
  deps: Pick<IngestDeps, "database" | "lookupKey" | "maxBodyBytes">,
): void {
  const admin = requireScope("admin");

  v1.get("/templates", admin, async (c) => {
    const query = validate(ListTemplatesQuery, c.req.query());
    const { data, total_count } = await listTemplates(deps.database, { page: query.page, pageSize: query.page_size });
    return c.json({ data, page: query.page, page_size: query.page_size, total_count });
  });

  v1.get("/templates/:id", admin, async (c) =>
    c.json(await getTemplate(deps.database, parseTemplateIdParam(c.req.param("id"), "read"), null)),
  );

  v1.get("/templates/:id/versions/:version", admin, async (c) => {
    const id = parseTemplateIdParam(c.req.param("id"), "read");
    return c.json(await getTemplate(deps.database, id, parseVersionParam(id, c.req.param("version"))));
  });

  v1.put("/templates/:id", limitBody(deps.maxBodyBytes), admin, async (c) => {
    const id = parseTemplateIdParam(c.req.param("id"), "write");
    const input = validate(TemplateRequest, await readJson(c));
    checkBodyTemplateId(id, input.template_id);
    const result = await putTemplate(deps.database, id, input);
    const { version } = result.template;
    if (result.kind === "unchanged") return c.json(result.template, 200);
    c.get("log").info(
      { template_id: id, version },
      result.kind === "created" ? "template created" : "template versioned",
    );
    c.header("location", `/api/v1/templates/${encodeURIComponent(id)}/versions/${version}`);
    return c.json(result.template, 201);
  });
}
