import { newApp } from "@notify/http";
import { captureLogger } from "@notify/testing";
import { Hono } from "hono";
import t from "tap";
import type { Principal } from "../src/auth/api-keys.js";
import type { AuthEnv } from "../src/auth/middleware.js";
import { contract } from "../src/routes/contract.js";

// A route states its scope once, in its contract: the scope the OpenAPI document shows is the
// one the route enforces, with no second statement beside the handler that could differ.

const principal = (scopes: Principal["scopes"]): Principal => ({ keyId: "k", clientId: "c", scopes, rateLimit: null });

function appWith(key: Principal | null) {
  const app = newApp(captureLogger().log);
  const v1 = new Hono<AuthEnv>();
  v1.use((c, next) => {
    if (key !== null) c.set("principal", key);
    return next();
  });
  const answer = () => new Response("served");
  const described = { summary: "x", tag: "x", responses: { 200: { description: "ok" } }, problems: [] };
  v1.get("/read", contract({ ...described, scope: "read" }), answer);
  v1.get("/public", contract({ ...described, scope: null }), answer);
  app.route("/api/v1", v1);
  return app;
}

t.test("a contract's scope is enforced: 401 without a key, 403 without the scope", async (t) => {
  const missing = await appWith(null).request("/api/v1/read");
  t.equal(missing.status, 401);
  t.equal(((await missing.json()) as { code: string }).code, "unauthenticated");
  const lacking = await appWith(principal(["ingest"])).request("/api/v1/read");
  t.equal(lacking.status, 403);
  t.equal(((await lacking.json()) as { code: string }).code, "insufficient_scope");
  t.equal(await (await appWith(principal(["read"])).request("/api/v1/read")).text(), "served");
  t.equal(
    await (await appWith(principal(["admin"])).request("/api/v1/read")).text(),
    "served",
    "admin holds every scope",
  );
});

t.test("a contract without a scope passes every request on", async (t) => {
  t.equal(await (await appWith(null).request("/api/v1/public")).text(), "served");
  t.equal(await (await appWith(principal(["ingest"])).request("/api/v1/public")).text(), "served");
});
