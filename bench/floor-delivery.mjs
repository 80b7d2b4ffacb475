// The least a durable email worker has to do, as the floor of bench/delivery.mjs: pull the work
// stream's transactional email consumer with the same concurrency as the worker and, per item,
// claim the send guard, send with @sendgrid/mail, record the guard as sent, mark the channel
// delivered with its history row, and ack. No breaker, rate bucket, retries, dead letters,
// logging or metrics: what is left is the cost of the durable work itself.
import { applyTopology, connectBus } from "@notify/bus";
import { createDb } from "@notify/db";
import { consume, emailDelivery, sendgridMail } from "./floor-lib.mjs";

const env = process.env;
const CONCURRENCY = Number(env.FLOOR_CONCURRENCY ?? 32);
const database = createDb({ url: env.DATABASE_URL, max: 8 });
const bus = await connectBus({
  servers: env.NATS_URL,
  name: "notify-bench-floor-delivery",
  namespace: env.NATS_NAMESPACE,
  partitions: 1,
});
await applyTopology(bus);
const deliver = emailDelivery({
  sql: database.sql,
  guard: await bus.kv("notify_send_guard"),
  mail: await sendgridMail(env.SENDGRID_API_KEY, env.SENDGRID_BASE_URL),
});
void consume(
  bus,
  { stream: bus.streams.work, durable: "worker-email-transactional", concurrency: CONCURRENCY },
  (item) => deliver({ ...item, html: item.body }),
);
process.on("SIGTERM", () => process.exit(0));
process.send?.("ready");
