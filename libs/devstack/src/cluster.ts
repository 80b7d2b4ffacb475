import { join } from "node:path";
import { applyTopology, connectBus, DEFAULT_STREAM_SETTINGS } from "@notify/bus";
import { type NatsCluster, startNatsCluster } from "./nats-server.js";
import type { AppName } from "./paths.js";
import { type RunningPostgres, startEmbeddedPostgres } from "./postgres.js";
import { type AppProcess, spawnApp } from "./processes.js";
import { type Stack, startStack } from "./stack.js";
import { freePort } from "./state.js";

export interface ClusterStack {
  /** The stack of the first instance of each app (sandboxes, development key, seeded sample). */
  stack: Stack;
  cluster: NatsCluster;
  postgres: RunningPostgres;
  /** The second instance of each app. */
  second: Map<AppName, AppProcess>;
  /** Both ingest instances: what a load balancer would spread requests over. */
  ingestUrls: string[];
  stop(): Promise<void>;
}

/**
 * The whole service as a deployment of several machines would run it, on this one: a three-node
 * JetStream cluster (streams and KV buckets at three replicas), an embedded PostgreSQL, the
 * provider sandboxes, and two instances of every app.
 */
export async function startClusterStack(options: {
  dataDir: string;
  partitions?: number;
  /** Settings of every app (the user's environment, as for npm start). */
  env?: Record<string, string>;
  appSettings?: Partial<Record<AppName, Record<string, string>>>;
  logLevel?: string;
  onLine?: (source: string, line: string) => void;
  say?: (line: string) => void;
}): Promise<ClusterStack> {
  const onLine = options.onLine ?? (() => {});
  const say = options.say ?? (() => {});
  const partitions = options.partitions ?? 8;
  const second = new Map<AppName, AppProcess>();
  let postgres: RunningPostgres | undefined;
  let cluster: NatsCluster | undefined;
  let stack: Stack | undefined;
  const stop = async () => {
    for (const proc of second.values()) await proc.stop().catch(() => {});
    await stack?.stop().catch(() => {});
    await cluster?.stop().catch(() => {});
    await postgres?.stop().catch(() => {});
  };
  try {
    postgres = await startEmbeddedPostgres({
      dataDir: options.dataDir,
      port: await freePort(),
      onLog: (line) => onLine("postgres", line),
    });
    const ports = [];
    for (let i = 0; i < 3; i++) ports.push({ client: await freePort(), route: await freePort() });
    cluster = await startNatsCluster({ dataDir: join(options.dataDir, "nats"), ports });
    say(`nats cluster: ${cluster.url}`);
    // Streams and buckets at three replicas, once the cluster has elected its meta leader.
    for (let attempt = 0; ; attempt++) {
      try {
        const setup = await connectBus({
          servers: cluster.url,
          name: "notify-cluster-setup",
          namespace: "",
          partitions,
          streamSettings: { ...DEFAULT_STREAM_SETTINGS, replicas: 3 },
        });
        try {
          await applyTopology(setup);
        } finally {
          await setup.close();
        }
        break;
      } catch (error) {
        if (attempt > 60) throw error;
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    }
    say("topology applied at three replicas");
    stack = await startStack({
      dataDir: options.dataDir,
      databaseUrl: postgres.url,
      natsUrl: cluster.url,
      namespace: "",
      partitions,
      // Every port picked free and claimed: ports derived from a free one are not claimed, and
      // another test file may be handed one of them before the stack listens on it.
      basePort: 0,
      logLevel: options.logLevel ?? "warn",
      env: { ...options.env, NATS_REPLICAS: "3" },
      ...(options.appSettings ? { appSettings: options.appSettings } : {}),
      seed: true,
      onLine,
    });
    // The second instance of every app, on ports of its own; the first ones are the stack's.
    const ingestUrls = [stack.baseUrl];
    const ready: Array<Promise<void>> = [];
    for (const name of ["ingest", "processor", "workers", "receipts"] as const) {
      const port = await freePort();
      const admin = name === "ingest" || name === "receipts" ? await freePort() : undefined;
      const env = {
        ...stack.appEnv,
        ...options.appSettings?.[name],
        PORT: String(port),
        ...(admin ? { ADMIN_PORT: String(admin) } : {}),
      };
      const proc = spawnApp(name, env, (_source, line) => onLine(`${name}-2`, line));
      second.set(name, proc);
      ready.push(proc.ready(`http://127.0.0.1:${admin ?? port}/readyz`, 60_000));
      if (name === "ingest") ingestUrls.push(`http://127.0.0.1:${port}`);
    }
    await Promise.all(ready);
    say("two instances of every app ready");
    return { stack, cluster, postgres, second, ingestUrls, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
