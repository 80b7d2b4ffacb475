import { seedApiKey } from "@notify/db";
import { eventually, freePort, freshDatabase, freshNamespace, TEST_NATS_URL } from "@notify/testing";
import t from "tap";
import { startIngest } from "../src/start.js";

// Two ingest instances as start.ts wires them (their own inbox pools, the revocations held in
// memory, the NATS listener): a token revoked through one ends a stream open on the other at
// once, and a stopping instance ends its streams so that it can stop.

const { url, database } = await freshDatabase(t);
const namespace = freshNamespace(t);

async function instance() {
  const port = await freePort();
  const running = await startIngest(
    {
      DATABASE_URL: url,
      NATS_URL: TEST_NATS_URL,
      NATS_NAMESPACE: namespace,
      LANE_PARTITIONS: "2",
      CURSOR_SECRET: "x".repeat(32),
      PORT: String(port),
      HOST: "127.0.0.1",
      ADMIN_PORT: String(await freePort()),
      LOG_LEVEL: "warn",
      CONSOLE_ENABLED: "false",
    },
    { telemetry: false },
  );
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await running.stop();
  };
  t.teardown(stop);
  return { base: `http://127.0.0.1:${port}/api/v1`, stop };
}

/** A stream read as it arrives; `done` settles when the server ends it. */
async function stream(base: string, token: string) {
  const res = await fetch(`${base}/inbox/stream`, { headers: { "x-inbox-token": token } });
  if (res.status !== 200 || res.body === null) throw new Error(`stream: ${res.status}`);
  const reader = res.body.getReader();
  let text = "";
  const done = (async () => {
    for (;;) {
      const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
      if (done) return;
      text += new TextDecoder().decode(value);
    }
  })();
  t.teardown(() => reader.cancel().catch(() => {}));
  await eventually(async () => (text.includes("event: ready") ? true : undefined), 5000, "ready");
  return { done, text: () => text };
}

const a = await instance();
const b = await instance();
const key = await seedApiKey(database, { clientId: "shop", name: "inbox", scopes: ["inbox"] });
const mint = async (userId: string) =>
  (await (
    await fetch(`${a.base}/users/${userId}/inbox-tokens`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}` },
    })
  ).json()) as { token: string; token_id: string };

t.test("a token revoked through one instance ends its stream on another at once", async (t) => {
  const minted = await mint("una");
  const open = await stream(b.base, minted.token);
  const revoked = await fetch(`${a.base}/users/una/inbox-tokens/${minted.token_id}`, {
    method: "DELETE",
    headers: { authorization: `Bearer ${key}` },
  });
  t.equal(revoked.status, 204);
  const ended = await Promise.race([
    open.done.then(() => true),
    new Promise<false>((resolve) => setTimeout(() => resolve(false), 1000)),
  ]);
  t.ok(ended, "the stream on b ended");
  t.match(open.text(), /event: token_ended\ndata: \{"reason":"revoked"\}/);
  t.equal((await fetch(`${b.base}/inbox`, { headers: { "x-inbox-token": minted.token } })).status, 401);

  const pools = await database.sql<{ application_name: string }[]>`
    select distinct application_name from pg_stat_activity where datname = current_database()`;
  t.ok(
    pools.some((p) => p.application_name === "notify-ingest-inbox"),
    "the inbox reads from a pool of its own",
  );
});

t.test("a stopping instance ends its streams (without token_ended: the client reconnects elsewhere)", async (t) => {
  const open = await stream(b.base, (await mint("vic")).token);
  const started = Date.now();
  const stopping = b.stop();
  await open.done;
  const ended = Date.now() - started;
  await stopping;
  t.ok(ended < 2000, `the stream ended ${ended} ms into the stop; the stop took ${Date.now() - started} ms`);
  t.notMatch(open.text(), /token_ended/);
});
