import { randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startStack } from "@notify/devstack";
import {
  eventually,
  freePort,
  freshDatabase,
  freshNamespace,
  settled,
  startTcpProxy,
  TEST_NATS_URL,
} from "@notify/testing";
import t from "tap";

// Ingest reaches the real NATS and Postgres through proxies the test can cut, so a server "goes
// away" for this file only while the shared servers keep serving the other files.
const { url, database } = await freshDatabase(t);
const pgUrl = new URL(url);
const pgProxy = await startTcpProxy({ host: pgUrl.hostname, port: Number(pgUrl.port || 5432) });
t.teardown(() => pgProxy.close());
pgUrl.port = String(pgProxy.port);
const namespace = freshNamespace(t);
const nats = new URL(TEST_NATS_URL);
const proxy = await startTcpProxy({ host: nats.hostname, port: Number(nats.port || 4222) });
t.teardown(() => proxy.close());
const ingestPort = await freePort();
const stack = await startStack({
  dataDir: mkdtempSync(join(tmpdir(), "notify-outage-")),
  databaseUrl: pgUrl.toString(),
  natsUrl: proxy.url("nats"),
  namespace,
  partitions: 2,
  basePort: ingestPort,
  ports: { ingest: ingestPort, sandbox: await freePort() },
  apps: ["ingest"],
  logLevel: "warn",
  seed: true,
  env: { PUBLISH_TIMEOUT_MS: "1000" },
});
t.teardown(() => stack.stop());

const body = JSON.stringify({
  user_id: "user-123",
  category: "account",
  template_id: "welcome",
  data: { name: "Ada" },
  priority: "transactional",
});
const post = (key: string) =>
  fetch(`${stack.baseUrl}/api/v1/notifications`, {
    method: "POST",
    headers: { authorization: `Bearer ${stack.apiKey}`, "content-type": "application/json", "idempotency-key": key },
    body,
  });
const rows = async () => Number((await database.sql`select count(*)::int as n from notifications`)[0]?.n);

t.test(
  "with NATS unreachable POST answers 503 problem+json and keeps nothing; once back, the same request is accepted",
  async (t) => {
    const key = randomUUID();
    await proxy.cut();
    await eventually(
      async () => {
        const r = await fetch(`${stack.adminUrl}/readyz`);
        return r.status === 503 ? true : undefined;
      },
      10_000,
      "ingest to notice the outage",
    );

    const refused = await post(key);
    t.equal(refused.status, 503);
    t.equal(refused.headers.get("content-type"), "application/problem+json");
    t.ok(refused.headers.get("retry-after"), "Retry-After tells the client when to come back");
    const problem = (await refused.json()) as Record<string, unknown>;
    t.match(problem, { status: 503, code: "dependency_unavailable", type: /dependency_unavailable$/ });
    t.notMatch(JSON.stringify(problem), /ECONNREFUSED|stack|at /, "no internals in the body");
    t.equal(await rows(), 0, "nothing stored, so nothing will be sent");

    await proxy.restore();
    const accepted = await eventually(
      async () => {
        const r = await post(key);
        return r.status === 202 ? ((await r.json()) as { notification_id: string; status: string }) : undefined;
      },
      20_000,
      "ingest to accept again",
    );
    t.equal(accepted.status, "accepted");
    t.equal(await rows(), 1);
    await settled(database, accepted.notification_id);
  },
);

t.test("with Postgres unreachable POST answers 503 problem+json; once back, the request is accepted", async (t) => {
  const key = randomUUID();
  await pgProxy.cut();
  const refused = await post(key);
  t.equal(refused.status, 503);
  t.equal(refused.headers.get("content-type"), "application/problem+json");
  t.match(await refused.json(), { status: 503, code: "dependency_unavailable" });
  t.notOk(await fetch(`${stack.adminUrl}/readyz`).then((r) => r.ok), "not ready without Postgres");

  await pgProxy.restore();
  const accepted = await eventually(
    async () => {
      const r = await post(key);
      return r.status === 202 ? ((await r.json()) as { notification_id: string }) : undefined;
    },
    20_000,
    "ingest to accept again",
  );
  const [row] = await database.sql`select dedup_key from notifications where id = ${accepted.notification_id}`;
  t.equal(row?.dedup_key, key);
});
