// The least a durable email worker has to do, as the floor of bench/delivery.mjs: pull the work
// stream's transactional email consumer with the same concurrency as the worker and, per item,
// claim the send guard, send with @sendgrid/mail, record the guard as sent, record the attempt
// and mark the channel delivered with its history row (the worker's own statement), and ack. No breaker, rate bucket, retries, dead letters,
// logging or metrics: what is left is the cost of the durable work itself.
//
// FLOOR_CHECKS=1 adds what every send must also do, with the project's own functions and nothing
// around them: the work item validated, the channel's row read (a cancelled or settled channel
// is not sent), a token taken from the provider's bucket shared by every worker (KV), and the
// mail's text/plain alternative made from its html. The gap between the two floors is what those
// checks cost; the gap from there to the worker is its plumbing (breaker, deadline, retries and
// their bookkeeping, logging, metrics).
import { applyTopology, connectBus } from "@notify/bus";
import { createDb } from "@notify/db";
import { htmlToText } from "@notify/providers";
import { sendChecks } from "./floor-checks.mjs";
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
const checks = env.FLOOR_CHECKS === "1";
const deliver = emailDelivery({
  sql: database.sql,
  guard: await bus.kv("notify_send_guard"),
  mail: await sendgridMail(env.SENDGRID_API_KEY, env.SENDGRID_BASE_URL),
  ...(checks ? { text: htmlToText } : {}),
});
// The worker's bucket for the provider, at the rate bench/delivery.mjs gives the worker.
const admit = checks && (await sendChecks({ sql: database.sql, bus, rate: Number(env.FLOOR_RATE ?? 1_000_000) }));
const handle = checks
  ? async (item) => {
      if (await admit(item)) await deliver({ ...item, html: item.body });
    }
  : (item) => deliver({ ...item, html: item.body });
void consume(
  bus,
  { stream: bus.streams.work, durable: "worker-email-transactional", concurrency: CONCURRENCY },
  handle,
);
process.on("SIGTERM", () => process.exit(0));
process.send?.("ready");
