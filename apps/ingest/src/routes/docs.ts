import type { Env, Hono } from "hono";
import type { AuthEnv } from "../auth/middleware.js";
import { contract, openApiDocument } from "./contract.js";
import { renderDocsPage } from "./docs-page.js";

const CACHE = "public, max-age=300";

/**
 * The OpenAPI document and its readable page, both without a key. They are generated from the
 * contracts on the routes of the whole app, which exists only once every route is mounted: so
 * on the first request, then kept (the routes never change after start-up).
 */
export function mountDocs<E extends Env>(v1: Hono<AuthEnv>, app: () => Hono<E>): void {
  let built: Promise<{ json: string; page: string }> | undefined;
  const document = () => {
    built ??= openApiDocument(app(), { version: "1" }).then((doc) => ({
      json: JSON.stringify(doc),
      page: renderDocsPage(doc),
    }));
    return built;
  };

  v1.get(
    "/openapi.json",
    contract({
      summary: "This OpenAPI document",
      tag: "Meta",
      scope: null,
      responses: { 200: { description: "OpenAPI 3.1" } },
      problems: [],
    }),
    async (c) => c.body((await document()).json, 200, { "content-type": "application/json", "cache-control": CACHE }),
  );

  v1.get(
    "/docs",
    contract({
      summary: "A readable page of this API",
      tag: "Meta",
      scope: null,
      responses: { 200: { description: "HTML" } },
      problems: [],
    }),
    async (c) =>
      c.html((await document()).page, 200, {
        "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'",
        "cache-control": CACHE,
      }),
  );
}
