import { randomUUID } from "node:crypto";
import type { Bus } from "@notify/bus";
import { createDb, seedApiKey, seedTemplate } from "@notify/db";
import { captureLogger, freshBus, freshDatabase } from "@notify/testing";
import t from "tap";
import { createIngestor } from "../src/notifications/create.js";
import { createTemplateLookup } from "../src/notifications/templates.js";
import { ingestApp } from "./support.js";

// Overload edges: the group-commit queue is bounded (503 with Retry-After, nothing stored, when
// full), and a statement Postgres cancels at statement_timeout answers 503, not 500.

const { url, database } = await freshDatabase(t);
const realBus = await freshBus(t);
await seedTemplate(database, {
  id: "welcome",
  params: [],
  variants: [{ channel: "email", locale: "en", subject: "Hi", body: "Hello" }],
});
const key = await seedApiKey(database, { clientId: "shop", name: "ingest", scopes: ["ingest", "read"] });
const rows = async () => Number((await database.sql`select count(*)::int as n from notifications`)[0]?.n);

const post = (
  app: { request: (path: string, init: RequestInit) => Response | Promise<Response> },
  idempotencyKey: string,
) =>
  app.request("/api/v1/notifications", {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json", "idempotency-key": idempotencyKey },
    body: JSON.stringify({
      user_id: "u1",
      category: "orders",
      template_id: "welcome",
      data: {},
      priority: "transactional",
    }),
  });

t.test("a full group-commit queue answers 503 with Retry-After at once and stores nothing", async (t) => {
  // The first batch's publish waits until released, so the requests after it queue up.
  let release = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  const bus: Bus = {
    ...realBus,
    async publish(subject, payload, msgId) {
      await held;
      return realBus.publish(subject, payload, msgId);
    },
  };
  const { log } = captureLogger("ingest");
  const templates = createTemplateLookup(database, 0);
  const ingestor = createIngestor({ database, bus, log, templates }, { maxConcurrentBatches: 1, queueLimit: 2 });
  const { app } = await ingestApp(t, { database, bus, ingestor, templates });

  const keys = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
  const first = post(app, keys[0] as string);
  while ((await rows()) === 0) await new Promise((resolve) => setTimeout(resolve, 10));
  const queued = [post(app, keys[1] as string), post(app, keys[2] as string)];
  await new Promise((resolve) => setTimeout(resolve, 100));
  // Answered while the first batch is still held: a request that waited for the queue to drain
  // would never be answered before the release below.
  const refused = await Promise.race([
    post(app, keys[3] as string),
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error("not answered while the queue is held")), 20_000).unref(),
    ),
  ]);
  t.equal(refused.status, 503);
  t.equal(refused.headers.get("content-type"), "application/problem+json");
  t.equal(refused.headers.get("retry-after"), "1");
  t.match(await refused.json(), { code: "dependency_unavailable", status: 503 });

  release();
  const answers = await Promise.all([first, ...queued]);
  t.same(
    answers.map((r) => r.status),
    [202, 202, 202],
    "the queued requests are accepted once the batch moves",
  );
  t.equal(await rows(), 3, "the refused request stored nothing");
  t.equal(
    (await database.sql`select count(*)::int as n from idempotency_keys where key = ${keys[3] as string}`)[0]?.n,
    0,
    "nor claimed its key",
  );
  t.equal((await post(app, keys[3] as string)).status, 202, "so its retry is a first attempt");
  await ingestor.drain();
});

t.test("a statement cancelled at statement_timeout answers 503 with Retry-After, not 500", async (t) => {
  const slow = createDb({ url, max: 2, statementTimeoutMs: 300 });
  t.teardown(() => slow.close());
  const { app } = await ingestApp(t, { database: slow, bus: realBus });
  // Another session holds the notifications table: a read of it waits until cancelled.
  const lock = await database.sql.reserve();
  await lock`begin`;
  await lock`lock table notifications in access exclusive mode`;
  t.teardown(async () => {
    await lock`rollback`;
    lock.release();
  });
  const started = performance.now();
  const answer = await app.request(`/api/v1/notifications/${randomUUID()}`, { headers: { "x-api-key": key } });
  t.ok(performance.now() - started < 5000, "cancelled, not waiting for the lock");
  t.equal(answer.status, 503);
  t.equal(answer.headers.get("retry-after"), "1");
  t.match(await answer.json(), { code: "dependency_unavailable" });
  await t.rejects(slow.sql`select pg_sleep(2)`, { code: "57014" }, "Postgres cancels it: query_canceled");
});

t.test("every pool has a statement timeout unless told otherwise", async (t) => {
  const plain = createDb({ url, max: 1 });
  const none = createDb({ url, max: 1, statementTimeoutMs: 0 });
  t.teardown(async () => {
    await plain.close();
    await none.close();
  });
  t.equal((await plain.sql`show statement_timeout`)[0]?.statement_timeout, "15s");
  t.equal((await none.sql`show statement_timeout`)[0]?.statement_timeout, "0");
});
