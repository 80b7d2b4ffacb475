import { type Bus, connectBus } from "@notify/bus";
import { createDb, type Database } from "@notify/db";
import { eventually } from "./eventually.js";
import { TEST_NATS_URL } from "./services.js";
import { startTcpProxy, type TcpProxy } from "./tcp-proxy.js";
import type { Teardown } from "./teardown.js";

/**
 * A database and a bus of one test file reached through TCP proxies, so the file can cut either
 * dependency without stopping it for the others. postgres.js backs off up to 20 s between
 * reconnects; a short delay keeps outage tests quick without changing what a request answers.
 */
export async function proxiedDependencies(
  t: Teardown,
  options: { url: string; namespace: string; partitions: number; poolSize: number; publishTimeoutMs?: number },
): Promise<{ database: Database; bus: Bus; postgres: TcpProxy; nats: TcpProxy }> {
  const pgTarget = new URL(options.url);
  const postgres = await startTcpProxy({ host: pgTarget.hostname, port: Number(pgTarget.port || 5432) });
  t.teardown(() => postgres.close());
  const proxiedUrl = new URL(options.url);
  proxiedUrl.port = String(postgres.port);
  const database = createDb({ url: proxiedUrl.toString(), max: options.poolSize, reconnectDelaySeconds: 0.05 });
  t.teardown(() => database.close());
  const natsTarget = new URL(TEST_NATS_URL);
  const nats = await startTcpProxy({ host: natsTarget.hostname, port: Number(natsTarget.port || 4222) });
  t.teardown(() => nats.close());
  const bus = await connectBus({
    servers: nats.url("nats"),
    name: "notify-test-outage",
    namespace: options.namespace,
    partitions: options.partitions,
    ...(options.publishTimeoutMs ? { publishTimeoutMs: options.publishTimeoutMs } : {}),
  });
  t.teardown(() => bus.close());
  return { database, bus, postgres, nats };
}

/**
 * Cuts a proxy, waits until the app's /readyz reports that dependency down (so each request
 * really meets the outage), runs `work`, and restores the proxy.
 */
export async function whileCut(
  app: { request(path: string): Response | Promise<Response> },
  proxy: TcpProxy,
  check: "postgres" | "nats",
  work: () => Promise<void>,
): Promise<void> {
  await proxy.cut();
  try {
    await eventually(
      async () => {
        const r = await app.request("/readyz");
        const body = (await r.json()) as { checks: Record<string, boolean> };
        return r.status === 503 && body.checks[check] === false ? true : undefined;
      },
      10_000,
      `the app to notice ${check} is gone`,
    );
    await work();
  } finally {
    await proxy.restore();
  }
}
