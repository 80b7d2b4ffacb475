import { randomUUID } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectBus } from "@notify/bus";
import { startStack } from "@notify/devstack";
import { freePort, freshDatabase, freshNamespace, TEST_NATS_URL } from "@notify/testing";
import t from "tap";

// A lane at its limit refuses new notifications instead of dropping old ones: ingest (which
// created the lanes with NATS_LANE_MAX_MSGS=3, discard new) answers 503 with Retry-After, keeps
// nothing of the refused request, and counts the refusal for the alert; once the lane drains,
// the same request is accepted. No processor runs, so the lane only fills.
const { url, database } = await freshDatabase(t);
const namespace = freshNamespace(t);
const ingestPort = await freePort();
const stack = await startStack({
  dataDir: mkdtempSync(join(tmpdir(), "notify-full-")),
  databaseUrl: url,
  natsUrl: TEST_NATS_URL,
  namespace,
  partitions: 1,
  basePort: ingestPort,
  ports: { ingest: ingestPort, sandbox: await freePort() },
  apps: ["ingest"],
  logLevel: "error",
  seed: true,
  env: { NATS_LANE_MAX_MSGS: "3" },
});
t.teardown(() => stack.stop());
const bus = await connectBus({ servers: TEST_NATS_URL, name: "stream-full-test", namespace, partitions: 1 });
t.teardown(() => bus.close());

const post = (key: string) =>
  fetch(`${stack.baseUrl}/api/v1/notifications`, {
    method: "POST",
    headers: { authorization: `Bearer ${stack.apiKey}`, "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify({
      user_id: "user-123",
      category: "account",
      template_id: "welcome",
      data: { name: "Ada" },
      priority: "transactional",
    }),
  });
const rows = async () => Number((await database.sql`select count(*)::int as n from notifications`)[0]?.n);
const refusals = async () => {
  const text = await (await fetch(`${stack.adminUrl}/metrics`)).text();
  return Number(/notify_stream_full_refusals_total\{subject="[^"]*lane\.transactional"\} (\d+)/.exec(text)?.[1] ?? 0);
};

t.test("a full lane answers 503 with Retry-After, keeps nothing, counts it; once drained it accepts", async (t) => {
  const stream = bus.streams.lane("transactional");
  const info = await bus.jsm.streams.info(stream);
  t.equal(info.config.max_msgs, 3, "the lane was created with the configured limit");
  t.equal(info.config.discard, "new", "refusing new work rather than dropping old");
  t.equal(info.config.max_age, 0, "and never dropping work for its age");

  for (let i = 0; i < 3; i++) t.equal((await post(randomUUID())).status, 202, `notification ${i + 1} accepted`);
  const key = randomUUID();
  const refused = await post(key);
  t.equal(refused.status, 503, "the fourth is refused");
  t.equal(refused.headers.get("content-type"), "application/problem+json");
  t.ok(Number(refused.headers.get("retry-after")) > 0, "with Retry-After");
  t.match(await refused.json(), { status: 503, code: "dependency_unavailable" });
  t.equal(await rows(), 3, "nothing of the refused request is kept");
  t.equal((await bus.jsm.streams.info(stream)).state.messages, 3, "and the accepted ones are all still there");
  t.equal(await refusals(), 1, "the refusal is counted for the alert");

  await bus.jsm.streams.purge(stream, { keep: 0 });
  const accepted = await post(key);
  t.equal(accepted.status, 202, "once the lane drains, the same request is accepted");
  t.equal(await rows(), 4);
});
