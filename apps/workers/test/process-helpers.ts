import type { Bus } from "@notify/bus";
import type { WorkItem } from "@notify/core";
import { type AppProcess, spawnApp } from "@notify/devstack";
import { freePort, TEST_NATS_URL } from "@notify/testing";

type Tap = { teardown(fn: () => unknown): void; comment(...args: unknown[]): void };

export interface WorkerProcess {
  proc: AppProcess;
  port: number;
  metrics(): Promise<string>;
}

/** A real worker process (apps/workers/dist) on the test's database, namespace and sandbox. */
export async function spawnWorker(
  t: Tap,
  options: { databaseUrl: string; bus: Bus; sandboxUrl: string; env?: Record<string, string> },
): Promise<WorkerProcess> {
  const port = await freePort();
  const proc = spawnApp(
    "workers",
    {
      DATABASE_URL: options.databaseUrl,
      NATS_URL: TEST_NATS_URL,
      NATS_NAMESPACE: options.bus.naming.namespace,
      LANE_PARTITIONS: String(options.bus.naming.partitions),
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
      EMAIL_PROVIDER: "sandbox",
      SENDGRID_API_KEY: "SG.test",
      SENDGRID_BASE_URL: options.sandboxUrl,
      DB_POOL_SIZE: "4",
      TRANSACTIONAL_DB_POOL_SIZE: "4",
      ...options.env,
    },
    (app, line) => t.comment(`[${app}:${port}] ${line}`),
  );
  t.teardown(() => proc.stop(5000));
  await proc.ready(`http://127.0.0.1:${port}/readyz`);
  return {
    proc,
    port,
    metrics: async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).text(),
  };
}

export const publish = (bus: Bus, item: WorkItem) =>
  bus.publish(bus.subjects.work(item.channel, item.priority), item, `${item.notification_id}:${item.channel}`);
