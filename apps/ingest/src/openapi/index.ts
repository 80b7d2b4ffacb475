import type { Hono } from "hono";
import type { AuthEnv } from "../auth/middleware.js";
import { AUDIENCE_ROUTES } from "./audience-routes.js";
import { BROADCAST_ROUTES } from "./broadcast-routes.js";
import { buildOpenApi } from "./document.js";
import { INBOX_ROUTES } from "./inbox-routes.js";
import { LIST_ROUTES } from "./list-routes.js";
import { renderDocsPage } from "./page.js";
import type { RouteDoc } from "./registry.js";
import { DOC_ROUTES, KEY_ROUTES, NOTIFICATION_ROUTES, TEMPLATE_ROUTES, USER_ROUTES } from "./routes.js";

export type { RouteDoc } from "./registry.js";

/** Every documented operation; a test checks it matches the routes the app serves. */
export const API_ROUTES: RouteDoc[] = [
  ...NOTIFICATION_ROUTES,
  ...KEY_ROUTES,
  ...USER_ROUTES,
  ...TEMPLATE_ROUTES,
  ...INBOX_ROUTES,
  ...LIST_ROUTES,
  ...AUDIENCE_ROUTES,
  ...BROADCAST_ROUTES,
  ...DOC_ROUTES,
];

export function mountOpenApi(v1: Hono<AuthEnv>, routes: readonly RouteDoc[] = API_ROUTES): void {
  const document = buildOpenApi(routes, { version: "1" });
  const json = JSON.stringify(document);
  const page = renderDocsPage(document);
  v1.get("/openapi.json", (c) =>
    c.body(json, 200, { "content-type": "application/json", "cache-control": "public, max-age=300" }),
  );
  v1.get("/docs", (c) =>
    c.html(page, 200, {
      "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'",
      "cache-control": "public, max-age=300",
    }),
  );
}
