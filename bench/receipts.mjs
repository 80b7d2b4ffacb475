// node bench/receipts.mjs: the CPU apps/receipts spends per provider event, against the least a
// receipts service has to do (bench/floor-receipts.mjs: verify, parse, the same rows written in
// one transaction per post) measured in the same run, each on a database of its own in the run's
// state (BENCH_DB_STATE: fresh, or a copy of the history template, bench/lib.mjs; never
// analysed) holding the same delivered channels, as the workers leave them. The app runs as
// shipped (LOG_LEVEL info). SendGrid Event Webhook posts are signed and
// batched as the SendGrid sandbox posts them ('delivered' events, one per channel); then Plivo
// status callbacks, one report per post, signed as the Plivo sandbox signs them. Posts go out at
// a fixed concurrency, as fast as they are answered; a phase ends once every event is applied.
// CPU per event of each process group (server, postgres, nats-server, load generator), from /proc;
// Postgres without the backends of other databases, which other sessions' tests use meanwhile.
//   BENCH_EVENTS (20000), BENCH_PLIVO_EVENTS (4000), BENCH_CONCURRENCY (8), BENCH_DB_STATE;
//   BENCH_CPU_PROF_DIR=<dir> writes the receipts app's V8 CPU profile there (bench/cpu-profile.mjs),
//   summarised by bench/profile-top.mjs (the profiler's own cost is then in the app's numbers);
//   BENCH_NODE_OPTIONS adds Node.js options to the app and the floor (docs/benchmarks.md#profiles).
import { generateKeyPairSync, randomBytes, randomUUID } from "node:crypto";
import { spawnApp, waitReady } from "@notify/devstack";
import {
  plivoSignatureV2,
  plivoSignatureV3,
  SENDGRID_SIGNATURE_HEADER,
  SENDGRID_TIMESTAMP_HEADER,
  signSendgridEvents,
} from "@notify/providers";
import { freePort, freshNamespace, TEST_NATS_URL } from "@notify/testing";
import {
  benchDatabase,
  benchNodeOptions,
  cpuBetween,
  cpuTicks,
  dbState,
  floorExecArgv,
  forkChild,
  profileEnv,
  summarize,
} from "./lib.mjs";

const EVENTS = Number(process.env.BENCH_EVENTS ?? 20000);
const PLIVO_EVENTS = Number(process.env.BENCH_PLIVO_EVENTS ?? 4000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
// The SendGrid sandbox's BATCH_EVENTS (libs/devstack sandboxes/sendgrid.ts): events per post.
const BATCH = 500;
const PLIVO_TOKEN = "plivo-sandbox-token";
const teardowns = [];
const t = { teardown: (fn) => teardowns.push(fn) };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A tenth more channels warm each server up (connections, JIT) before it is measured.
const warm = (n) => Math.min(n, Math.max(BATCH, Math.ceil(n / 10)));
const emails = Array.from({ length: warm(EVENTS) + EVENTS }, (_, i) => ({
  notificationId: randomUUID(),
  // SendGrid's X-Message-Id, which the worker records as provider_id.
  providerId: randomBytes(16).toString("base64url"),
  email: `bench-${i}@example.com`,
}));
const texts = Array.from({ length: warm(PLIVO_EVENTS) + PLIVO_EVENTS }, () => ({
  notificationId: randomUUID(),
  providerId: randomUUID(),
}));

/** The channels as a worker leaves them after the provider accepted: delivered, with provider id, attempt and history. */
async function seed(sql) {
  const rows = [
    ...emails.map((m) => [m.notificationId, "email", "sendgrid", m.providerId]),
    ...texts.map((m) => [m.notificationId, "sms", "plivo", m.providerId]),
  ];
  const [ids, channels, providers, providerIds] = [0, 1, 2, 3].map((k) => rows.map((r) => r[k]));
  await sql`
    insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    select id, 'bench', 'u-' || id, 'account', 'welcome', 'transactional', '{"name":"Ada"}', id, md5(id), 0
    from unnest(${ids}::text[]) id`;
  await sql`
    insert into notification_channels (notification_id, channel, status, provider, provider_id, attempts)
    select id, channel, 'delivered', provider, provider_id, 1
    from unnest(${ids}::text[], ${channels}::text[], ${providers}::text[], ${providerIds}::text[])
      as c(id, channel, provider, provider_id)`;
  await sql`
    insert into delivery_attempts (notification_id, channel, attempt, outcome, provider_id)
    select notification_id, channel, 1, 'accepted', provider_id from notification_channels
    where notification_id = any(${ids}::text[])`;
  await sql`
    insert into channel_status_events (notification_id, channel, status, attempt, provider_id)
    select notification_id, channel, status, attempts, provider_id from notification_channels
    where notification_id = any(${ids}::text[])`;
}

// Events as the SendGrid sandbox builds them: custom args at the top level, ids, smtp-id, categories.
const sendgridBodies = (from, to) => {
  const bodies = [];
  for (let i = from; i < to; i += BATCH) {
    const events = emails.slice(i, Math.min(i + BATCH, to)).map((m) => ({
      notification_id: m.notificationId,
      channel: "email",
      email: m.email,
      timestamp: Math.floor(Date.now() / 1000),
      event: "delivered",
      sg_event_id: randomBytes(16).toString("base64url"),
      sg_message_id: `${m.providerId}.sandbox-0-${randomBytes(4).toString("hex")}.0`,
      "smtp-id": `<${m.providerId}@sandbox.sendgrid.net>`,
      category: ["account"],
    }));
    bodies.push({ events: events.length, body: Buffer.from(JSON.stringify(events)) });
  }
  return bodies;
};
const sendgridWarm = sendgridBodies(0, warm(EVENTS));
const sendgridRun = sendgridBodies(warm(EVENTS), emails.length);

/** Signed just before a phase: the receiver refuses timestamps older than 10 minutes. */
const signSendgrid = (bodies, privateKey) =>
  bodies.map(({ events, body }) => {
    const timestamp = String(Math.floor(Date.now() / 1000));
    return {
      path: "/webhooks/sendgrid",
      events,
      body,
      headers: {
        "content-type": "application/json",
        [SENDGRID_SIGNATURE_HEADER]: signSendgridEvents(privateKey, timestamp, body),
        [SENDGRID_TIMESTAMP_HEADER]: timestamp,
      },
    };
  });

/** Plivo's final report of each message, signed for the URL the provider set (the target's own). */
const plivoReports = (baseUrl, from, to) =>
  texts.slice(from, to).map((m) => {
    const path = `/webhooks/plivo?notification_id=${m.notificationId}`;
    const params = {
      MessageUUID: m.providerId,
      From: "+14155550100",
      To: "+14155550199",
      Units: "1",
      Status: "delivered",
    };
    const form = Object.fromEntries(Object.entries(params).map(([k, value]) => [k, [value]]));
    const nonce = randomBytes(12).toString("hex");
    return {
      path,
      events: 1,
      body: new URLSearchParams(params).toString(),
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        "x-plivo-signature-v2": plivoSignatureV2(PLIVO_TOKEN, `${baseUrl}${path}`, nonce),
        "x-plivo-signature-v2-nonce": nonce,
        "x-plivo-signature-v3": plivoSignatureV3(PLIVO_TOKEN, "POST", `${baseUrl}${path}`, form, nonce),
        "x-plivo-signature-v3-nonce": nonce,
      },
    };
  });

const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const serverEnv = {
  SENDGRID_WEBHOOK_PUBLIC_KEY: publicKey.export({ format: "der", type: "spki" }).toString("base64"),
  PLIVO_AUTH_TOKEN: PLIVO_TOKEN,
};

const appDb = await benchDatabase(t);
const floorDb = await benchDatabase(t);
await seed(appDb.database.sql);
await seed(floorDb.database.sql);
// The seeding's dirty pages are written now, not during a measured phase.
await appDb.database.sql`checkpoint`;

const appPort = await freePort();
const adminPort = await freePort();
const receipts = spawnApp(
  "receipts",
  {
    ...serverEnv,
    DATABASE_URL: appDb.url,
    NATS_URL: TEST_NATS_URL,
    NATS_NAMESPACE: freshNamespace(t),
    PORT: String(appPort),
    ADMIN_PORT: String(adminPort),
    HOST: "127.0.0.1",
    // Its default level, as in production: one line per post.
    LOG_LEVEL: "info",
    ...profileEnv(),
  },
  (_, line) => {
    if (/"level":(50|60)/.test(line)) console.error(`[receipts] ${line}`);
  },
  benchNodeOptions(),
);
teardowns.push(() => receipts.stop());
await waitReady(`http://127.0.0.1:${adminPort}/readyz`, 30_000, () => receipts.child.exitCode === null);

const floorPort = await freePort();
const floor = await new Promise((resolve, reject) => {
  const child = forkChild(new URL("./floor-receipts.mjs", import.meta.url), [], {
    execArgv: floorExecArgv(),
    env: { ...process.env, ...serverEnv, DATABASE_URL: floorDb.url, PORT: String(floorPort) },
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
  child.once("message", () => resolve(child));
  child.once("exit", (code) => reject(new Error(`floor-receipts.mjs exited ${code}`)));
});
teardowns.push(() => floor.kill());

const targetOf = (port, pid, db) => ({
  url: `http://127.0.0.1:${port}`,
  pid,
  sql: db.database.sql,
  database: new URL(db.url).pathname.slice(1),
});
const targets = {
  receipts: targetOf(appPort, receipts.child.pid, appDb),
  floor: targetOf(floorPort, floor.pid, floorDb),
};

const PG_DATABASE = /^postgres: (?:[^:]+: )?(?:autovacuum worker (\S+)|\S+ (\S+) (?:\S+\(\d+\)|\[local\]))/;

/** CPU ticks so far of each group serving a target (its postgres backends only); null without /proc. */
function cpuSample(target) {
  const ticks = cpuTicks(({ pid, comm, cmdline }) => {
    if (pid === process.pid) return "load generator";
    if (pid === target.pid) return "server";
    if (comm === "nats-server") return comm;
    const database = PG_DATABASE.exec(cmdline);
    return comm === "postgres" && (database === null || (database[1] ?? database[2]) === target.database) ? comm : null;
  });
  return ticks && { server: 0, postgres: 0, "nats-server": 0, "load generator": 0, ...ticks };
}

/** Posts every request, CONCURRENCY at a time, each as soon as one is answered. */
async function drive(target, requests) {
  let next = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < requests.length) {
        const r = requests[next++];
        const res = await fetch(`${target.url}${r.path}`, { method: "POST", headers: r.headers, body: r.body });
        await res.arrayBuffer();
        if (res.status !== 200) failed++;
      }
    }),
  );
  return failed;
}

/**
 * Waits until no receipt of the provider waits to be applied. Both servers store a post's
 * receipts before they answer it, so once every post is answered this is every event applied.
 * The poll reads the unapplied receipts' partial index: it costs Postgres as little in a
 * database with history as in a fresh one.
 */
async function applied(target, provider) {
  for (let waited = 0; ; waited += 50) {
    const [row] = await target.sql`
      select count(*)::int as n from provider_receipts where provider = ${provider} and applied_at is null`;
    if (row.n === 0) return;
    if (waited > 30_000) throw new Error(`${provider}: ${row.n} receipts still unapplied after 30 s`);
    await sleep(50);
  }
}

async function phase(name, provider, build) {
  const target = targets[name];
  const warmUp = build(target, true);
  await drive(target, warmUp);
  const requests = build(target, false);
  const events = requests.reduce((sum, r) => sum + r.events, 0);
  const before = cpuSample(target);
  const started = performance.now();
  const failed = await drive(target, requests);
  await applied(target, provider);
  const seconds = (performance.now() - started) / 1000;
  const after = cpuSample(target);
  const cpu = cpuBetween(before, after);
  return { name, events, posts: requests.length, failed, seconds, cpu };
}

const sendgrid = (_target, warmUp) => signSendgrid(warmUp ? sendgridWarm : sendgridRun, privateKey);
const plivo = (target, warmUp) =>
  warmUp ? plivoReports(target.url, 0, warm(PLIVO_EVENTS)) : plivoReports(target.url, warm(PLIVO_EVENTS), texts.length);

const results = {};
try {
  for (const name of ["receipts", "floor"]) results[`sendgrid ${name}`] = await phase(name, "sendgrid", sendgrid);
  for (const name of ["receipts", "floor"]) results[`plivo ${name}`] = await phase(name, "plivo", plivo);
} finally {
  for (const fn of teardowns.reverse()) await fn();
}

/** The server's and Postgres' CPU per event (what a deployment pays), in microseconds. */
const service = (r) => (r.cpu ? (r.cpu.server + r.cpu.postgres) / r.events : Number.NaN);
const line = (r) =>
  [
    `  ${r.name.padEnd(9)} ${(r.events / r.seconds).toFixed(0).padStart(6)} events/s   ${r.events} events in ${r.posts} posts, ${r.seconds.toFixed(2)} s, ${r.failed} not answered 200`,
    r.cpu
      ? `            CPU per event (µs): ${Object.entries(r.cpu)
          .map(([group, us]) => `${group === "server" ? r.name : group} ${(us / r.events).toFixed(1)}`)
          .join(", ")}; ${r.name} + postgres ${service(r).toFixed(1)}`
      : "            (no /proc: CPU not measured)",
  ].join("\n");

console.log(`\nSendGrid Event Webhook: signed posts of ${BATCH} 'delivered' events, ${CONCURRENCY} concurrent`);
console.log(line(results["sendgrid receipts"]));
console.log(line(results["sendgrid floor"]));
console.log(`Plivo status callbacks: one signed 'delivered' report per post, ${CONCURRENCY} concurrent`);
console.log(line(results["plivo receipts"]));
console.log(line(results["plivo floor"]));
const [app, min] = [results["sendgrid receipts"], results["sendgrid floor"]];
console.log(
  `\nSendGrid events/s: receipts ${(app.events / app.seconds).toFixed(0)}, floor ${(min.events / min.seconds).toFixed(0)}`,
);
console.log(
  `receipts: ${service(app).toFixed(1)} µs CPU per event (app + postgres); floor: ${service(min).toFixed(1)} µs; ratio (floor / receipts): ${(service(min) / service(app)).toFixed(3)}`,
);
console.log(`database: ${dbState()}; the receipts as shipped (LOG_LEVEL info)`);
summarize({
  what: `receipts, one SendGrid event (${BATCH} a post)`,
  notify: { cpuUs: service(app), rate: app.events / app.seconds },
  floor: { cpuUs: service(min), rate: min.events / min.seconds },
  ratio: service(min) / service(app),
  command: "npm run bench:receipts",
});
