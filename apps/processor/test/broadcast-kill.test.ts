import { spawnApp } from "@notify/devstack";
import { eventually, freePort, freshBus, freshDatabase, TEST_NATS_URL } from "@notify/testing";
import t from "tap";

// Resumability with a real process: a processor is SIGKILLed in the middle of expanding a
// broadcast; a new one resumes from the stored cursor, and every member ends up with exactly
// one notification: none skipped, none twice.
const MEMBERS = 20_000;
const { database, url } = await freshDatabase(t);
const bus = await freshBus(t);

await database.sql`insert into audiences (id, name) values ('big', 'big')`;
await database.sql`insert into audience_members (audience_id, user_id)
  select 'big', 'member-' || n from generate_series(1, ${MEMBERS}) n`;
await database.sql`insert into broadcasts (id, client_id, dedup_key, request_hash, audience_id, category, template_id,
    data, status, total)
  values ('bc', 'shop', 'k', 'h', 'big', 'deals', 'promo', '{}', 'expanding', ${MEMBERS})`;

async function spawnProcessor() {
  const port = await freePort();
  const proc = spawnApp(
    "processor",
    {
      DATABASE_URL: url,
      NATS_URL: TEST_NATS_URL,
      NATS_NAMESPACE: bus.naming.namespace,
      LANE_PARTITIONS: String(bus.naming.partitions),
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
      DB_POOL_SIZE: "4",
      TRANSACTIONAL_DB_POOL_SIZE: "2",
      BROADCAST_BATCH_SIZE: "100",
      BROADCAST_POLL_INTERVAL_MS: "100",
    },
    (app, line) => t.comment(`[${app}:${port}] ${line}`),
  );
  t.teardown(() => proc.stop(5000));
  await proc.ready(`http://127.0.0.1:${port}/readyz`);
  return proc;
}

const expanded = async () =>
  (
    await database.sql<{ expanded: number; status: string }[]>`
    select expanded::int as expanded, status from broadcasts where id = 'bc'`
  )[0] as { expanded: number; status: string };

t.test("a processor killed mid-expansion: every member gets exactly one notification", async (t) => {
  const first = await spawnProcessor();
  await eventually(async () => ((await expanded()).expanded >= 1000 ? true : undefined), 30_000, "expansion under way");
  first.child.kill("SIGKILL");
  t.equal(await first.exited, null, "killed, not exited");
  const atKill = await expanded();
  t.ok(atKill.expanded < MEMBERS, `killed mid-way (${atKill.expanded} of ${MEMBERS})`);
  t.equal(atKill.status, "expanding");

  await spawnProcessor();
  await eventually(
    async () => ((await expanded()).status === "expanded" ? true : undefined),
    60_000,
    "resumed and finished",
  );

  const [counts] = await database.sql<{ recipients: number; users: number; notifications: number; missing: number }[]>`
    select (select count(*)::int from broadcast_recipients where broadcast_id = 'bc') as recipients,
           (select count(distinct user_id)::int from broadcast_recipients where broadcast_id = 'bc') as users,
           (select count(*)::int from notifications where dedup_key like 'broadcast:bc:%') as notifications,
           (select count(*)::int from audience_members m where m.audience_id = 'big' and not exists (
              select 1 from broadcast_recipients r where r.broadcast_id = 'bc' and r.user_id = m.user_id)) as missing`;
  t.same(counts, { recipients: MEMBERS, users: MEMBERS, notifications: MEMBERS, missing: 0 });
  t.equal((await expanded()).expanded, MEMBERS);
});
