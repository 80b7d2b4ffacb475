// The least a durable ingest has to do, on bare Hono, as a reference of bench/ingest.mjs: read
// the JSON body, claim the idempotency key and insert the row with ingest's own accept statement
// (group commit: the same statement, columns, tables and indexes), publish it to JetStream and
// wait for the ack, answer 202, and settle the outbox row. No authentication, validation, rate limit, logging or
// metrics: what is left is the cost of the durability itself.
//
// FLOOR_CHECKS=1 adds what every accepted request must also pass, done with the project's own
// functions and nothing around them: the API key hashed and found, its leaky bucket, the
// Idempotency-Key parsed, the body validated, ingest's own preparation (the template's parameters
// and deadline, the canonical request hash, the lane message), and the answer's headers (request
// id, Location, RateLimit). The gap between the
// two floors is what those checks cost; the gap from there to ingest is the app's plumbing
// (middleware, logging, metrics, error handling).
import { createHash, randomUUID } from "node:crypto";
import { serve } from "@hono/node-server";
import { connectBus } from "@notify/bus";
import { createDb } from "@notify/db";
import { Hono } from "hono";
import { requestChecks } from "./floor-checks.mjs";
import { groupCommit } from "./floor-lib.mjs";

const checks = process.env.FLOOR_CHECKS === "1";
const database = createDb({ url: process.env.DATABASE_URL, max: 4 });
const bus = await connectBus({
  servers: process.env.NATS_URL,
  name: "notify-bench-floor",
  namespace: process.env.NATS_NAMESPACE,
  partitions: Number(process.env.LANE_PARTITIONS ?? 8),
});
const accept = groupCommit({
  database,
  bus,
  clientId: "bench",
  lane: bus.subjects.lane("transactional", 0),
});

const app = new Hono();
if (checks) {
  const check = requestChecks(process.env.FLOOR_API_KEY ?? "", bus);
  app.post("/", async (c) => {
    const checked = await check(c);
    if (checked instanceof Response) return checked;
    const { notification_id, ...message } = checked.message;
    await accept({ id: notification_id, key: checked.key, hash: checked.hash, body: message });
    return checked.answer(c);
  });
} else {
  app.post("/", async (c) => {
    const body = await c.req.json();
    const id = randomUUID();
    const hash = createHash("sha256").update(JSON.stringify(body)).digest("hex");
    await accept({ id, key: c.req.header("idempotency-key"), hash, body });
    return c.json({ notification_id: id, status: "accepted" }, 202);
  });
}
process.on("SIGTERM", () => process.exit(0));
serve({ fetch: app.fetch, port: Number(process.env.PORT), hostname: "127.0.0.1" }, () => process.send?.("ready"));
