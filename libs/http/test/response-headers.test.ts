import { serve } from "@hono/node-server";
import { AppError } from "@notify/core";
import { captureLogger } from "@notify/testing";
import t, { type Test } from "tap";
import { jsonResponse, newApp, promiseHeaders, responseHeaders } from "../src/index.js";

// Middleware promise headers to every answer (the request id, a key's rate limit, a version's
// deprecation); the busiest routes answer with jsonResponse, which carries them in one plain
// object, and every other answer gets those it lacks once it is built.
function setup() {
  const { log } = captureLogger("headers");
  const app = newApp(log);
  app.use("/api/*", (c, next) => responseHeaders(c, next, { ratelimit: '"default";r=9;t=1', vary: "x-api-key" }));
  app.post("/api/fast", (c) => jsonResponse(c, { ok: true }, 202, { location: "/api/fast/1" }));
  app.get("/api/plain", (c) => c.json({ ok: true }));
  app.get("/api/own", (c) => {
    c.header("vary", "accept");
    return c.text("mine");
  });
  app.get("/api/fails", () => {
    throw new AppError("not_found", "nothing here");
  });
  app.get("/api/odd", () => {
    // Not an Error: Hono's onError never sees it; the app's first middleware answers it.
    throw "a string";
  });
  app.get("/api/half", (c) => {
    c.header("set-cookie", "session=half-built");
    c.res = c.text("partial");
    throw "after an answer was set";
  });
  app.get("/api/bad-value", (c) => {
    promiseHeaders(c, { "x-broken": "line\nbreak" });
    return c.json({ ok: true });
  });
  app.get("/api/redirect", () => Response.redirect("http://example.com/elsewhere", 302));
  app.get("/api/stream", (c) => c.body(new ReadableStream({ start: (s) => s.close() })));
  return app;
}

const expectPromised = (t: Test, response: Response) => {
  t.match(response.headers.get("x-request-id"), /^[0-9a-f-]{36}$/, "the request id");
  t.equal(response.headers.get("ratelimit"), '"default";r=9;t=1', "the route middleware's header");
};

for (const [how, request] of [
  ["in-process (app.request)", (path: string, init?: RequestInit) => setup().request(path, init)],
  [
    "over HTTP (@hono/node-server)",
    async (path: string, init?: RequestInit) => {
      const server = serve({ fetch: setup().fetch, port: 0, hostname: "127.0.0.1" });
      await new Promise((resolve) => server.once("listening", resolve));
      const { port } = server.address() as { port: number };
      try {
        return await fetch(`http://127.0.0.1:${port}${path}`, { ...init, redirect: "manual" });
      } finally {
        server.close();
      }
    },
  ],
] as const) {
  t.test(how, async (t) => {
    const fast = await request("/api/fast", { method: "POST" });
    t.equal(fast.status, 202);
    expectPromised(t, fast);
    t.equal(fast.headers.get("location"), "/api/fast/1");
    t.equal(fast.headers.get("content-type"), "application/json");
    t.same(await fast.json(), { ok: true });

    const plain = await request("/api/plain");
    expectPromised(t, plain);
    t.equal(plain.headers.get("vary"), "x-api-key");
    t.match(plain.headers.get("content-type"), /^application\/json/);

    const own = await request("/api/own");
    t.equal(own.headers.get("vary"), "accept", "a header the route set itself wins");
    expectPromised(t, own);

    const fails = await request("/api/fails");
    t.equal(fails.status, 404);
    expectPromised(t, fails);
    t.equal(fails.headers.get("content-type"), "application/problem+json");

    const odd = await request("/api/odd");
    t.equal(odd.status, 500, "anything thrown is answered as a problem");
    t.equal(odd.headers.get("content-type"), "application/problem+json");
    expectPromised(t, odd);

    const nul = await request("/api/plain%00");
    t.equal(nul.status, 400, "a NUL in the URL is refused before any route");
    t.match(nul.headers.get("x-request-id"), /^[0-9a-f-]{36}$/);

    const half = await request("/api/half");
    t.equal(half.status, 500);
    t.equal(half.headers.get("set-cookie"), null, "a half-built answer's cookie does not reach the problem");
    expectPromised(t, half);

    const bad = await request("/api/bad-value");
    t.equal(bad.status, 200, "a promised value no answer takes is left out, not a failure");
    t.equal(bad.headers.get("x-broken"), null);
    expectPromised(t, bad);

    const redirect = await request("/api/redirect");
    t.equal(redirect.status, 302, "an answer with immutable headers is copied, not lost");
    t.equal(redirect.headers.get("location"), "http://example.com/elsewhere");
    expectPromised(t, redirect);

    const stream = await request("/api/stream");
    t.equal(stream.status, 200);
    expectPromised(t, stream);
  });
}
