// The least a router has to do per lane message, as the floor of bench/processor.mjs: the same
// libraries, tables, streams, durable consumers, pool and concurrency as apps/processor (one
// pull per transactional lane partition, PARTITION_CONCURRENCY messages in hand each, a pool of
// TRANSACTIONAL_DB_POOL_SIZE connections), and per notification:
//   read the user's contacts and preferences (the processor's profile query);
//   insert the channel row (the rows of one event-loop iteration in one statement, as the
//   processor does);
//   publish the work item to NOTIFY_WORK and wait for its ack;
//   ack the lane message.
// No validation, policy, template engine, preference cache, per-user ordering, leases, periodic
// jobs, logging or metrics: what is left is the cost of the durable work itself. The bench's
// notifications are email only, so each has one channel.
import { connectBus } from "@notify/bus";
import { createDb, perIteration, readProfileRow, unnestColumns } from "@notify/db";
import { consume } from "./floor-lib.mjs";

const env = process.env;
const PARTITIONS = Number(env.LANE_PARTITIONS ?? 16);
const CONCURRENCY = Number(env.PARTITION_CONCURRENCY ?? 16);
const database = createDb({ url: env.DATABASE_URL, max: Number(env.TRANSACTIONAL_DB_POOL_SIZE ?? 5) });
const bus = await connectBus({
  servers: env.NATS_URL,
  name: "notify-bench-floor-processor",
  namespace: env.NATS_NAMESPACE,
  partitions: PARTITIONS,
});

const insertChannel = perIteration(async (channels) => {
  await database.sql`
    insert into notification_channels (notification_id, channel, status, user_id)
    select id, 'email', 'pending', user_id from ${unnestColumns(database.sql, "n", {
      id: ["text", channels.map((c) => c.id)],
      user_id: ["text", channels.map((c) => c.user_id)],
    })} on conflict do nothing`;
  return channels.map(() => undefined);
});

async function route(message) {
  const profile = await readProfileRow(database, message.user_id);
  await insertChannel({ id: message.notification_id, user_id: message.user_id });
  // The welcome template's email variant, as the processor renders it.
  const name = message.data.name;
  await bus.publish(
    bus.subjects.work("email", message.priority),
    {
      notification_id: message.notification_id,
      channel: "email",
      priority: message.priority,
      user_id: message.user_id,
      category: message.category,
      to: profile.email,
      subject: `Welcome, ${name}!`,
      body: `<h1>Hello ${name}</h1><p>Thanks for joining.</p>`,
      attempt: 0,
    },
    `${message.notification_id}:email`,
  );
}

/** One partition's durable consumer, pulled as the processor does, CONCURRENCY messages at once. */
const partition = (p) => ({
  stream: bus.streams.lane("transactional"),
  durable: `processor-transactional-p${p}`,
  concurrency: CONCURRENCY,
  prefetch: Math.max(CONCURRENCY, 8),
});

for (let p = 0; p < PARTITIONS; p++) void consume(bus, partition(p), route);
process.on("SIGTERM", () => process.exit(0));
