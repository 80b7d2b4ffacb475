import { streamSettingsFrom } from "./apply.js";
import { applyTopology, connectBus } from "./index.js";

// npm run nats:apply [-- --force]: creates every stream, consumer and KV bucket of nats/ that is
// missing, with the apps' settings (NATS_REPLICAS, NATS_LANE_MAX_*, NATS_WORK_MAX_*). Existing
// streams keep theirs and the report says where they differ; --force replaces them. On a server
// with one user per role it connects as the setup user (NATS_USER, NATS_PASSWORD).
const env = process.env;
const number = (name: string) => (env[name] === undefined || env[name] === "" ? undefined : Number(env[name]));
const force = process.argv.includes("--force");
const bus = await connectBus({
  servers: env.NATS_URL ?? "nats://127.0.0.1:4222",
  name: "notify-nats-apply",
  role: "setup",
  ...(env.NATS_USER ? { user: env.NATS_USER, password: env.NATS_PASSWORD ?? "" } : {}),
  namespace: env.NATS_NAMESPACE ?? "",
  partitions: Number(env.LANE_PARTITIONS ?? 16),
  streamSettings: {
    ...streamSettingsFrom({
      NATS_REPLICAS: number("NATS_REPLICAS") ?? 1,
      NATS_LANE_MAX_MSGS: number("NATS_LANE_MAX_MSGS"),
      NATS_LANE_MAX_BYTES: number("NATS_LANE_MAX_BYTES"),
      NATS_WORK_MAX_MSGS: number("NATS_WORK_MAX_MSGS"),
      NATS_WORK_MAX_BYTES: number("NATS_WORK_MAX_BYTES"),
    }),
    force,
  },
});
for (const row of await applyTopology(bus)) {
  const drift = row.drift ? `\tdiffers: ${row.drift.join("; ")}${force ? "" : " (kept; --force replaces)"}` : "";
  process.stdout.write(`${row.kind}\t${row.name}\t${row.result}${drift}\n`);
}
await bus.close();
