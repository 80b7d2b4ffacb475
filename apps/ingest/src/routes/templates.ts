import { announceTemplateChanged } from "@notify/bus";
import { validate } from "@notify/core";
import { limitBody, readJson } from "@notify/http";
import type { Hono } from "hono";
import * as v from "valibot";
import type { AuthEnv } from "../auth/middleware.js";
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
  TemplateResponse,
} from "../templates/schemas.js";
import { spreadChange } from "./announce.js";
import { type Contract, contract } from "./contract.js";

const TemplatePage = v.object({
  data: v.array(TemplateResponse),
  page: v.number(),
  page_size: v.number(),
  total_count: v.number(),
});

/** Templates are the deployment's: any client's admin key reads them, only an operator writes one. */
const templates = (route: Omit<Contract, "tag" | "scope"> & { scope?: "operator" }) =>
  contract({ scope: "admin", ...route, tag: "Templates" });

/**
 * Templates: `admin` keys read them, only `operator` keys write one (a template is every client's
 * that names it, a one-time passcode's included), and every subject and body is held to the
 * logic-less template subset.
 */
export function mountTemplates(
  v1: Hono<AuthEnv>,
  deps: Pick<IngestDeps, "database" | "lookupKey" | "maxBodyBytes" | "bus" | "templates">,
): void {
  v1.get(
    "/templates",
    templates({
      summary: "List templates",
      query: ListTemplatesQuery,
      responses: {
        200: { description: "A page of templates at their latest version (offset pagination)", schema: TemplatePage },
      },
      problems: ["validation_failed"],
    }),
    async (c) => {
      const query = validate(ListTemplatesQuery, c.req.query());
      const { data, total_count } = await listTemplates(deps.database, { page: query.page, pageSize: query.page_size });
      return c.json({ data, page: query.page, page_size: query.page_size, total_count });
    },
  );

  v1.get(
    "/templates/:id",
    templates({
      summary: "Read a template's latest version",
      responses: { 200: { description: "The latest version", schema: TemplateResponse } },
      problems: ["validation_failed", "not_found"],
    }),
    async (c) => c.json(await getTemplate(deps.database, parseTemplateIdParam(c.req.param("id"), "read"), null)),
  );

  v1.get(
    "/templates/:id/versions/:version",
    templates({
      summary: "Read one version of a template",
      responses: { 200: { description: "That version", schema: TemplateResponse } },
      problems: ["validation_failed", "not_found"],
    }),
    async (c) => {
      const id = parseTemplateIdParam(c.req.param("id"), "read");
      return c.json(await getTemplate(deps.database, id, parseVersionParam(id, c.req.param("version"))));
    },
  );

  v1.put(
    "/templates/:id",
    templates({
      scope: "operator",
      summary: "Write a template's next version",
      description:
        "Versions are immutable: every change writes the next one, and identical content writes nothing. Subjects and bodies are eta templates held to a logic-less subset (escaped interpolation of data paths, a fixed set of filters, if/else and for-of over data arrays); anything else is refused with 422 template_invalid naming the line and column. Only operator keys write them: a template is every client's that names it.",
      body: TemplateRequest,
      responses: {
        201: {
          description: "A new version was written",
          schema: TemplateResponse,
          headers: { Location: "The version's URL" },
        },
        200: { description: "The content equals the latest version: nothing written", schema: TemplateResponse },
      },
      problems: [
        "validation_failed",
        "template_invalid",
        "malformed_json",
        "payload_too_large",
        "unsupported_media_type",
      ],
    }),
    limitBody(deps.maxBodyBytes),
    async (c) => {
      const id = parseTemplateIdParam(c.req.param("id"), "write");
      const input = validate(TemplateRequest, await readJson(c));
      checkBodyTemplateId(id, input.template_id);
      const result = await putTemplate(deps.database, id, input);
      const { version } = result.template;
      if (result.kind === "unchanged") return c.json(result.template, 200);
      // Every ingest and processor instance forgets its cached latest version at once, so a
      // notification posted right after the PUT, to any instance, pins the new version.
      await spreadChange(c, {
        forget: () => deps.templates.forget?.(id),
        announce: () => announceTemplateChanged(deps.bus, { template_id: id }),
        fields: { template_id: id },
        within: "their cache TTL (5 s in ingest, 10 s in the processor)",
      });
      c.get("log").info(
        { template_id: id, version },
        result.kind === "created" ? "template created" : "template versioned",
      );
      c.header("location", `/api/v1/templates/${encodeURIComponent(id)}/versions/${version}`);
      return c.json(result.template, 201);
    },
  );
}
