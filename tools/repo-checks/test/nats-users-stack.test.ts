import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import type { Role } from "@notify/bus";
import { ROOT, SAMPLE_NOTIFICATION, SAMPLE_USER } from "@notify/devstack";
import { eventually, postNotification, settledView, startNatsWithUsers, startTestStack } from "@notify/testing";
import t from "tap";

// The whole service as compose runs it on NATS: each app as its own least-privilege user
// (nats/nats.conf), the apps only checking the topology, the setup job creating it. A
// notification on all four channels, a dead letter listed through ingest (which asks the
// processor: its own user reads no stream) and replayed by the `notify` CLI as the operator
// user: everything works, and the server refused nothing.
const run = promisify(execFile);
const nats = await startNatsWithUsers(t);
const user = (role: Role) => ({ NATS_USER: role, NATS_PASSWORD: nats.passwords[role] });
const app = (role: Role) => ({ ...user(role), NATS_TOPOLOGY: "verify" });
const PARTITIONS = 2;

// The apps start before the setup job has run: they wait for the topology instead of failing or
// creating it (which their users may not).
const starting = startTestStack(t, {
  natsUrl: nats.url,
  namespace: "",
  partitions: PARTITIONS,
  appSettings: {
    // Keys cached for a minute: a revocation must arrive on NATS to be refused at once.
    ingest: { ...app("ingest"), AUTH_CACHE_TTL_SECONDS: "60" },
    processor: app("processor"),
    workers: app("workers"),
    receipts: app("receipts"),
  },
});
await new Promise((resolve) => setTimeout(resolve, 2000));
const applied = await run(process.execPath, [join(ROOT, "libs/bus/dist/apply-cli.js")], {
  env: { PATH: process.env.PATH, NATS_URL: nats.url, ...user("setup"), LANE_PARTITIONS: String(PARTITIONS) },
});
const { stack } = await starting;
const key = stack.apiKey as string;

/** The built `notify` CLI as the operator runs it: its own NATS user. */
const notify = (...argv: string[]) =>
  run(process.execPath, [join(ROOT, "libs/cli/bin/notify.js"), ...argv], {
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: stack.databaseUrl,
      NATS_URL: nats.url,
      LANE_PARTITIONS: String(PARTITIONS),
      ...user("operator"),
    },
  });

t.test("the setup job created the topology as the setup user", async (t) => {
  t.match(applied.stdout, /^stream\tNOTIFY_WORK\tcreated$/m);
});

t.test("all four channels deliver, and a dead letter is listed and replayed", async (t) => {
  // The sample user's email is refused once, definitively: dead-lettered by the workers.
  const fault = await fetch(`${stack.sandboxes.sendgrid}/sandbox/faults`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ status: 400, match_to: SAMPLE_USER.email, times: 1 }),
  });
  t.equal(fault.status, 204);
  const id = await postNotification(stack.baseUrl, key, SAMPLE_NOTIFICATION);
  const view = await settledView(stack.baseUrl, key, id);
  t.match(view.channels, {
    push: { status: "delivered" },
    sms: { status: /^(sent|delivered)$/ },
    in_app: { status: "delivered" },
    email: { status: "failed" },
  });

  // The dead-letter routes take the operator's scope, which the stack's key does not hold.
  const operator = JSON.parse(
    (await notify("keys", "create", "--name", "operator", "--client", "ops", "--scope", "operator", "--json")).stdout,
  ) as { key: string };
  const listed = await eventually(async () => {
    const response = await fetch(`${stack.baseUrl}/api/v1/dead-letters?notification_id=${id}`, {
      headers: { authorization: `Bearer ${operator.key}` },
    });
    const body = (await response.json()) as { data: Array<{ channel: string }> };
    return body.data.length > 0 ? body.data : undefined;
  });
  t.same(
    listed.map((l) => l.channel),
    ["email"],
    "ingest lists the dead letters (the processor reads them)",
  );
  // Unfiltered, a page is found by counting (ephemeral consumers made and deleted as the processor).
  const newest = await fetch(`${stack.baseUrl}/api/v1/dead-letters?page_size=1`, {
    headers: { authorization: `Bearer ${operator.key}` },
  });
  const page = (await newest.json()) as { data: Array<{ seq: number; notification_id: string }>; total_count: number };
  t.equal(newest.status, 200);
  t.equal(page.data[0]?.notification_id, id, "the newest letter first");
  t.ok(page.total_count >= 1);
  const seq = page.data[0]?.seq;
  const shown = await fetch(`${stack.baseUrl}/api/v1/dead-letters/${seq}`, {
    headers: { authorization: `Bearer ${operator.key}` },
  });
  t.equal(shown.status, 200, "and one letter whole");
  t.match(await shown.json(), { seq, letter: { channel: "email" }, status_now: { status: "failed" } });
  const planned = await fetch(`${stack.baseUrl}/api/v1/dead-letters/replay`, {
    method: "POST",
    headers: { authorization: `Bearer ${operator.key}`, "content-type": "application/json" },
    body: JSON.stringify({ seqs: [seq], dry_run: true }),
  });
  t.equal(planned.status, 200, "a replay planned through ingest, by the processor");
  t.match(await planned.json(), { dry_run: true, selected: 1, replayed: 0 });

  const replay = await notify("dlq", "replay", "--notification", id);
  t.match(replay.stdout, /replayed/, "the operator's CLI replays it");
  const replayed = await eventually(async () => {
    const response = await fetch(`${stack.baseUrl}/api/v1/notifications/${id}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const body = (await response.json()) as { channels: Record<string, { status: string }> };
    return body.channels.email?.status === "delivered" ? body : undefined;
  }, 30_000);
  t.equal(replayed.channels.email?.status, "delivered");

  // A cancel is asked of the processor too (notify.ops.cancel): everything was sent, so it stays.
  const canceled = await fetch(`${stack.baseUrl}/api/v1/notifications/${id}/cancel`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}` },
  });
  t.equal(canceled.status, 200, "a cancel through ingest, by the processor");
  t.match(await canceled.json(), {
    channels: { email: { status: "delivered" } },
    cancel: { email: { result: "not_canceled" } },
  });
});

t.test("a key revoked by the operator's CLI is refused by ingest at once", async (t) => {
  const issued = JSON.parse(
    (await notify("keys", "create", "--name", "short-lived", "--client", "shop", "--scope", "read", "--json")).stdout,
  ) as {
    id: string;
    key: string;
  };
  const read = () =>
    fetch(`${stack.baseUrl}/api/v1/notifications/01a00000-0000-7000-8000-000000000000`, {
      headers: { authorization: `Bearer ${issued.key}` },
    });
  t.equal((await read()).status, 404, "the key works (and is now cached)");
  const revoked = await notify("keys", "revoke", issued.id);
  t.match(revoked.stderr, /were told on NATS/);
  t.equal((await read()).status, 401, "refused at once, though ingest caches keys for a minute");
});

t.test("the server refused nothing any app or the CLI asked for", async (t) => {
  t.same(nats.violations(), []);
});
