// Baseline: a bare Hono hello-world on @hono/node-server, the ceiling for any Hono route here.
import { serve } from "@hono/node-server";
import { Hono } from "hono";

const app = new Hono();
app.post("/", async (c) => {
  await c.req.json();
  return c.json({ ok: true }, 202);
});
serve({ fetch: app.fetch, port: Number(process.env.PORT), hostname: "127.0.0.1" }, () => process.send?.("ready"));
