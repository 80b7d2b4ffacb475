import { newId } from "@notify/core";
import { embeddedDatabase, freshDatabase } from "@notify/testing";
import postgres from "postgres";
import t from "tap";
import { moveStatus } from "../src/delivery/status.js";
import {
  applyPendingReceipts,
  cancelNotification,
  markAllInboxItems,
  recordReceipts,
  resetChannelForReplay,
  setInboxItemState,
  settleInAppFromInbox,
  storeInboxItem,
} from "../src/index.js";
import { probeIdOrder } from "../src/log-keys.js";
import { createDb, type Database } from "../src/pool.js";
import { someoneWaitsForALock } from "./support.js";

// Every writer that locks rows of the log, when another transaction updated one of them while it
// waited for the lock: PostgreSQL then checks the row's newest version again (EvalPlanQual)
// before it goes on. The writer must go on as if it had come second: its effect whole, the
// server up. On each server the service runs on here: this machine's (TEST_DATABASE_URL), and
// the embedded one `npm start` runs, a newer major version whose recheck of a row locked inside
// a CTE of a partitioned table crashes the server process or drops the statement's rows.

type Sql = Database["sql"];

interface Scenario {
  name: string;
  /** Makes the rows; answers what the other steps need. */
  seed(sql: Sql): Promise<Record<string, string>>;
  /** What the other transaction does to the rows, holding them until the writer waits. */
  touch(tx: postgres.TransactionSql, rows: Record<string, string>): Promise<unknown>;
  /** The writer, started while the rows are held. */
  write(database: Database, rows: Record<string, string>): Promise<unknown>;
  /** What the writer must have done, read once it is done. */
  check(sql: Sql, rows: Record<string, string>, result: unknown): Promise<unknown>;
  expected: unknown;
}

// Its id a UUIDv7 of now (support.ts's insertNotification makes v4 ids, which land in the default
// partition): the writers' bounds by id then have today's partition to prune to.
const addNotification = async (sql: Sql): Promise<string> => {
  const id = newId();
  await sql`insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    values (${id}, 'c', 'u', 'promo', 'welcome', 'promotional', '{}', ${id}, 'h', 0)`;
  return id;
};

const addChannel = (sql: Sql, id: string, channel: string, status: string, providerId: string | null) =>
  sql`insert into notification_channels (notification_id, channel, status, provider, provider_id, user_id)
    values (${id}, ${channel}, ${status}, ${providerId === null ? null : "sendgrid"}, ${providerId}, 'u')`;

/**
 * A notification with these channels, each [channel, status, sent]: a sent one's send is
 * recorded under provider id `send-<notification id>`. Answers `{ id }`.
 */
async function notificationWith(
  sql: Sql,
  ...channels: Array<[channel: string, status: string, sent: boolean]>
): Promise<Record<string, string>> {
  const id = await addNotification(sql);
  for (const [channel, status, sent] of channels)
    await addChannel(sql, id, channel, status, sent ? `send-${id}` : null);
  return { id };
}

const touchChannels = (tx: postgres.TransactionSql, id: string) =>
  tx`update notification_channels set updated_at = now() where notification_id = ${id}`;

const statuses = async (sql: Sql, id: string) =>
  Object.fromEntries(
    (
      await sql<{ channel: string; status: string }[]>`
      select channel, status from notification_channels where notification_id = ${id} order by channel`
    ).map((r) => [r.channel, r.status]),
  );

const receipt = (providerId: string, eventId: string, status: string, payload: Record<string, string> = {}) => ({
  provider: "sendgrid",
  eventId,
  providerId,
  status: status as never,
  reason: null,
  payload,
});

const SCENARIOS: Scenario[] = [
  {
    name: "a worker's status moves",
    seed: (sql) => notificationWith(sql, ["email", "pending", false], ["sms", "pending", false]),
    touch: (tx, { id }) => touchChannels(tx, id as string),
    write: ({ sql }, { id }) =>
      Promise.all(
        ["email", "sms"].map((channel) =>
          moveStatus(sql, { notification_id: id as string, channel: channel as never, user_id: "u" }, "delivered", {
            provider: "sendgrid",
            providerId: `${channel}-send`,
            attempts: 1,
            attempt: {
              attempt: 1,
              outcome: "accepted",
              provider: "sendgrid",
              providerId: `${channel}-send`,
              error: null,
            },
          }),
        ),
      ),
    check: async (sql, { id }, moved) => ({ moved, statuses: await statuses(sql, id as string) }),
    expected: { moved: [true, true], statuses: { email: "delivered", sms: "delivered" } },
  },
  {
    name: "a worker's status move after another writer moved the channel on",
    seed: (sql) => notificationWith(sql, ["email", "pending", false]),
    // A cancel, say, committed while the worker waited: the row no longer moves to delivered.
    touch: (tx, { id }) =>
      tx`update notification_channels set status = 'canceled' where notification_id = ${id as string}`,
    write: ({ sql }, { id }) =>
      moveStatus(sql, { notification_id: id as string, channel: "email", user_id: "u" }, "delivered", {
        provider: "sendgrid",
        providerId: `send-${id}`,
        attempts: 1,
      }),
    check: async (sql, { id }, moved) => ({ moved, statuses: await statuses(sql, id as string) }),
    expected: { moved: false, statuses: { email: "canceled" } },
  },
  {
    name: "a replay of a dead-lettered channel",
    seed: (sql) => notificationWith(sql, ["email", "failed", false]),
    touch: (tx, { id }) => touchChannels(tx, id as string),
    write: (database, { id }) =>
      resetChannelForReplay(database, {
        notificationId: id as string,
        channel: "email",
        from: ["failed"],
        reason: "replayed",
      }),
    check: async (sql, { id }, reset) => ({ reset, statuses: await statuses(sql, id as string) }),
    expected: { reset: true, statuses: { email: "pending" } },
  },
  {
    name: "a post of receipts",
    seed: (sql) => notificationWith(sql, ["email", "delivered", true]),
    touch: (tx, { id }) => touchChannels(tx, id as string),
    write: ({ sql }, { id }) => recordReceipts(sql, [receipt(`send-${id}`, `bounce-${id}`, "bounced")]),
    check: async (sql, { id }) => statuses(sql, id as string),
    expected: { email: "bounced" },
  },
  {
    name: "a post of receipts that name their notification",
    seed: (sql) => notificationWith(sql, ["email", "delivered", true]),
    touch: (tx, { id }) => touchChannels(tx, id as string),
    write: ({ sql }, { id }) =>
      recordReceipts(sql, [
        receipt(`send-${id}`, `bounce-${id}`, "bounced", { notification_id: id as string, channel: "email" }),
      ]),
    check: async (sql, { id }) => statuses(sql, id as string),
    expected: { email: "bounced" },
  },
  {
    name: "a post of receipts in two rounds",
    seed: (sql) => notificationWith(sql, ["email", "pending", true]),
    touch: (tx, { id }) => touchChannels(tx, id as string),
    write: ({ sql }, { id }) =>
      recordReceipts(sql, [
        receipt(`send-${id}`, `delivered-${id}`, "delivered"),
        receipt(`send-${id}`, `bounce-${id}`, "bounced"),
      ]),
    check: async (sql, { id }) => statuses(sql, id as string),
    expected: { email: "bounced" },
  },
  {
    name: "a receipt that binds its send to the channel it names",
    seed: (sql) => notificationWith(sql, ["email", "pending", false]),
    touch: (tx, { id }) => touchChannels(tx, id as string),
    write: ({ sql }, { id }) =>
      recordReceipts(sql, [
        receipt(`send-${id}`, `delivered-${id}`, "delivered", { notification_id: id as string, channel: "email" }),
      ]),
    check: async (sql, { id }) => statuses(sql, id as string),
    expected: { email: "delivered" },
  },
  {
    name: "the sweep of receipts that came before their send",
    seed: async (sql) => {
      const id = await addNotification(sql);
      await addChannel(sql, id, "email", "pending", null);
      // Stored pending: no channel had its provider id yet.
      await recordReceipts(sql, [receipt(`send-${id}`, `delivered-${id}`, "delivered")]);
      await sql`update notification_channels set provider = 'sendgrid', provider_id = ${`send-${id}`}
        where notification_id = ${id}`;
      return { id };
    },
    touch: (tx, { id }) => touchChannels(tx, id as string),
    write: ({ sql }) => applyPendingReceipts(sql),
    check: async (sql, { id }) => statuses(sql, id as string),
    expected: { email: "delivered" },
  },
  {
    name: "a cancel by the client",
    seed: (sql) => notificationWith(sql, ["email", "pending", false], ["sms", "pending", false]),
    touch: (tx, { id }) => touchChannels(tx, id as string),
    write: (database, { id }) =>
      cancelNotification(database, { id: id as string, clientId: "c" }, (ops) =>
        ops.cancel(
          ops.channels.map((c) => c.channel),
          "canceled",
          "canceled by the client",
        ),
      ),
    check: async (sql, { id }, result) => ({ result, statuses: await statuses(sql, id as string) }),
    expected: { result: { routed: true, result: ["email", "sms"] }, statuses: { email: "canceled", sms: "canceled" } },
  },
  {
    name: "a change of an inbox item's state",
    seed: async (sql) => {
      const id = await addNotification(sql);
      const item = await storeInboxItem(sql, {
        userId: "u",
        notificationId: id,
        category: "promo",
        title: null,
        body: "hello",
      });
      return { id, item: String(item) };
    },
    touch: (tx, { item }) => tx`update inbox_items set seen_at = now() where id = ${Number(item)}`,
    write: (database, { item }) =>
      setInboxItemState(database, { userId: "u", clientId: "c" }, Number(item), { read: true }),
    check: async (sql, { item }, result) => {
      const [row] = await sql<{ read: boolean; seen: boolean }[]>`
        select read_at is not null as read, seen_at is not null as seen from inbox_items where id = ${Number(item)}`;
      return { answered: result !== null, ...row };
    },
    expected: { answered: true, read: true, seen: true },
  },
  {
    name: "a mark of every inbox item",
    seed: async (sql) => {
      const ids = [await addNotification(sql), await addNotification(sql)];
      const items = [];
      for (const id of ids) {
        items.push(
          await storeInboxItem(sql, { userId: "m", notificationId: id, category: "promo", title: null, body: "hi" }),
        );
      }
      return { first: String(items[0]), last: String(items[1]) };
    },
    touch: (tx, { first }) => tx`update inbox_items set seen_at = now() where id = ${Number(first)}`,
    write: (database) => markAllInboxItems(database, { userId: "m", clientId: "c" }, "read", null),
    check: async (sql, { first, last }, changed) => {
      const rows = await sql<{ read: boolean }[]>`
        select read_at is not null as read from inbox_items where id in (${Number(first)}, ${Number(last)}) order by id`;
      return { changed, read: rows.map((r) => r.read) };
    },
    expected: { changed: 2, read: [true, true] },
  },
  {
    name: "the sweep of in-app sends the inbox holds",
    seed: async (sql) => {
      const id = await addNotification(sql);
      await addChannel(sql, id, "in_app", "unsettled", null);
      await storeInboxItem(sql, { userId: "u", notificationId: id, category: "promo", title: null, body: "hi" });
      return { id };
    },
    touch: (tx, { id }) => touchChannels(tx, id as string),
    // Every in-app channel left unsettled before now, this one among them.
    write: (database) => settleInAppFromInbox(database, new Date(Date.now() + 60_000), 1000),
    check: async (sql, { id }) => statuses(sql, id as string),
    expected: { in_app: "delivered" },
  },
];

const SERVERS: Array<{ name: string; open(): Promise<{ url: string; database: Database; log?(): string[] }> }> = [
  { name: "this machine's PostgreSQL", open: () => freshDatabase(t) },
  { name: "the embedded PostgreSQL", open: () => embeddedDatabase(t) },
];

// Each writer on its first run (a custom plan) and as it runs once warm (the generic plan).
const PLANS = [
  { name: "custom plans", setting: "force_custom_plan" },
  { name: "the generic plan", setting: "force_generic_plan" },
];

for (const server of SERVERS) {
  t.test(server.name, async (t) => {
    const { url, database, log } = await server.open();
    const { sql } = database;
    const [{ version } = { version: "?" }] = await sql<
      { version: string }[]
    >`select current_setting('server_version') as version`;
    t.comment(`PostgreSQL ${version}`);
    // The embedded server is the one with the fault these writers avoid.
    if (log) t.match(version, /^18\./, "the embedded server is PostgreSQL 18");
    const other = postgres(url, { max: 1, onnotice: () => {} });
    t.teardown(() => other.end());
    for (const plan of PLANS) {
      const writer = createDb({ url: `${url}${url.includes("?") ? "&" : "?"}plan_cache_mode=${plan.setting}`, max: 4 });
      t.teardown(() => writer.close());
      // As createDb asks in the background: whether the pool may bound its lookups as the
      // executor starts (withinIdsLocking: before PostgreSQL 18, as this machine's 15 is; the
      // embedded 18 bounds them as they run). Both ways are held to the same effect.
      t.ok(
        await probeIdOrder(writer.sql),
        "the database orders ids as JavaScript does, so its bounds are found in JavaScript",
      );
      for (const scenario of SCENARIOS) {
        await t.test(`${scenario.name}, on ${plan.name}`, async (t) => {
          // A server a scenario before crashed is back once it accepts connections again.
          for (let i = 0; i < 300; i++) {
            if (
              await sql`select 1`.then(
                () => true,
                () => false,
              )
            )
              break;
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
          const rows = await scenario.seed(sql);
          let release = () => {};
          const held = new Promise<void>((resolve) => {
            release = resolve;
          });
          let touched = () => {};
          const isTouched = new Promise<void>((resolve) => {
            touched = resolve;
          });
          const toucher = other.begin(async (tx) => {
            await scenario.touch(tx, rows);
            touched();
            await held;
          });
          await isTouched;
          const writing = scenario.write(writer, rows);
          writing.catch(() => {});
          t.ok(await someoneWaitsForALock(sql), "the writer waited for the rows");
          release();
          await toucher;
          const result = await writing;
          t.same(await scenario.check(sql, rows, result), scenario.expected, "the writer's effect is whole");
        });
      }
    }
    if (log)
      t.same(
        log().filter((line) => /terminated by signal|recovery mode/.test(line)),
        [],
        "the server never crashed",
      );
  });
}
