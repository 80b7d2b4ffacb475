import { randomUUID } from "node:crypto";
import { freshDatabase, seedNotification } from "@notify/testing";
import t from "tap";
import {
  type AcceptedRow,
  acceptNotifications,
  createDb,
  loadChannel,
  moveStatus,
  readProfileRow,
  recordRoutedChannels,
} from "../src/index.js";

// The batched statements of every notification's path keep one plan per connection (a generic
// plan) instead of planning again on every run: planning them cost more than running them (the
// routing's 1.1 ms against 0.8, a channel read's 0.29 against 0.10, on a loaded machine). Each
// runs here in batches of one, where PostgreSQL would otherwise plan every run for its arrays'
// actual length.
const { database: seeded, url } = await freshDatabase(t);
// One connection: prepared statements and their plans belong to it.
const database = createDb({ url, max: 1 });
t.teardown(() => database.close());
const RUNS = 8;

t.test("the hot path's batched statements run on a kept generic plan", async (t) => {
  // Tables of some size, with their statistics, as in a running service: on a few rows the
  // planner weighs the two kinds of plan differently.
  await seeded.sql`
    insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    select 'old-' || i, 'c', 'u-' || (i % 1000), 'account', 'welcome', 'transactional', '{}', 'old-' || i, 'h', 0
    from generate_series(1, 20000) i`;
  await seeded.sql`
    insert into notification_channels (notification_id, channel, status)
    select 'old-' || i, 'email', 'delivered' from generate_series(1, 20000) i`;
  await seeded.sql`analyze`;
  const ids = Array.from({ length: RUNS }, () => randomUUID());
  for (const id of ids) await seedNotification(seeded, { id, clientId: "c", userId: `u-${id}` });
  for (const id of ids) {
    // One at a time: a batch of one each.
    await recordRoutedChannels(database, {
      notificationId: id,
      clientId: "c",
      userId: `u-${id}`,
      priority: "transactional",
      channels: [{ channel: "email", status: "pending", reason: null, nextAttemptAt: null }],
      deferredUntil: null,
      cap: null,
    });
    await readProfileRow(database, `u-${id}`);
    await loadChannel(database.sql, { notification_id: id, channel: "email", user_id: `u-${id}` });
    await moveStatus(database.sql, { notification_id: id, channel: "email" }, "delivered", {
      provider: "sendgrid",
      providerId: `p-${id}`,
      attempts: 1,
      attempt: { attempt: 1, outcome: "accepted", provider: "sendgrid", providerId: `p-${id}`, error: null },
    });
    const row: AcceptedRow = {
      id: randomUUID(),
      client_id: "c",
      key: randomUUID(),
      request_hash: "h",
      user_id: "u",
      category: "account",
      template_id: "welcome",
      template_version: 1,
      priority: "transactional",
      channels: ["email"],
      data: {},
      partition: 0,
      deliver_by: null,
      fallback: null,
    };
    await acceptNotifications(database, [row], 24);
  }
  const statements = await database.sql<{ statement: string; generic_plans: number; custom_plans: number }[]>`
    select statement, generic_plans::int, custom_plans::int from pg_prepared_statements`;
  const planOf = (marker: string) => statements.find((s) => s.statement.includes(marker));
  for (const [name, marker] of [
    ["routing", "deferred_notifications"],
    ["profile read", "left join user_preferences"],
    ["channel read", "c.attempts_before_replay"],
    ["status move", "delivery_attempts"],
    ["accept", "insert into idempotency_keys"],
  ] as const) {
    const plan = planOf(marker);
    t.ok(plan, `${name}: prepared`);
    t.ok(
      plan && plan.generic_plans >= RUNS - 5 && plan.custom_plans <= 5,
      `${name}: planned ${plan?.custom_plans} times for ${RUNS} runs (${plan?.generic_plans} on the kept plan)`,
    );
  }
});
