import { applyTopology, connectBus } from "./index.js";

// npm run nats:apply: creates or updates every stream, consumer and KV bucket in nats/.
const bus = await connectBus({
  servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222",
  name: "notify-nats-apply",
  namespace: process.env.NATS_NAMESPACE ?? "",
  partitions: Number(process.env.LANE_PARTITIONS ?? 16),
});
for (const row of await applyTopology(bus)) process.stdout.write(`${row.kind}\t${row.name}\t${row.result}\n`);
await bus.close();
