import { type Channel, newId } from "@notify/core";
import { freshDatabase } from "@notify/testing";
import postgres from "postgres";
import t, { type Test } from "tap";
import {
  type AcceptedRow,
  acceptNotifications,
  applyPendingReceipts,
  cancelNotification,
  checkCompletions,
  claimDelivery,
  countInboxItems,
  type Database,
  endFallback,
  findUnroutedNotifications,
  findWaitingChannels,
  inboxItemsSince,
  latestInboxItemId,
  listDueDeferrals,
  listInboxItems,
  listInboxItemsAfter,
  listOpenFallbacks,
  listPendingChannels,
  loadChannel,
  markAllInboxItems,
  moveStatus,
  readDeliveryHistory,
  readFallbackRoutable,
  readNotification,
  readNotificationTimeline,
  recentInboxCategories,
  recordAttempt,
  recordReceipts,
  recordRoutedChannels,
  releaseDeferrals,
  removeUnpublished,
  setInboxItemState,
  settleInAppFromInbox,
  settlePendingChannel,
  settleWaitingChannel,
  startFallbackWait,
  storeInboxItem,
  sweepPublishOutbox,
  takeFallbackStep,
  touchWaitingChannel,
} from "../src/index.js";
import { probeIdOrder } from "../src/log-keys.js";

// Every statement of a notification's path reaches the partitions of the notification log it
// needs and no other: one per table for one notification (the partition its id falls in), and a
// sweep only the partitions of its range. The log here has 35 and more daily partitions with rows
// in each, and every statement runs as the services run it: a prepared statement on a generic
// plan (plan_cache_mode = force_generic_plan), which prunes only when the executor starts, or
// per row of a nested loop. auto_explain logs each statement's plan as it ran (EXPLAIN ANALYZE),
// statements of trigger functions included, and a partition counts as touched when a node of it
// ran (`Actual Loops` > 0); those pruned are missing from the plan ("Subplans Removed") or never ran.
// A statement that touches more is shown with its plan (PRUNING_PLANS=1 shows every one).
const { database: admin, url } = await freshDatabase(t);
await admin.sql`select notify_log_extend(now() + interval '35 days', interval '1 day')`;

const LOG_PARTITION =
  /^(notifications|notification_channels|channel_status_events|delivery_attempts|notification_fallbacks|provider_receipts|inbox_items|broadcast_recipients)_(p|default)/;

/**
 * The receipts' partitions a notification's receipts are always looked for in besides its own:
 * the default one (receipts that name no notification) and the first (receipts from before the
 * receipts were partitioned, '': drizzle/0031). Not counted against a statement.
 */
const RECEIPTS_ALWAYS = new Set(["provider_receipts_default", "provider_receipts_p0"]);

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Subplan Name"?: string;
  "Actual Loops"?: number;
  "Actual Rows"?: number;
  "Rows Removed by Filter"?: number;
  "Subplans Removed"?: number;
  Plans?: PlanNode[];
}
interface Logged {
  query: string;
  plan: PlanNode;
}
const logged: Logged[] = [];
const sql = postgres(url, {
  max: 1,
  onnotice: (notice) => {
    const message = String(notice.message ?? "");
    if (!message.startsWith("duration:")) return;
    const { "Query Text": query, Plan: plan } = JSON.parse(message.slice(message.indexOf("{"))) as {
      "Query Text": string;
      Plan: PlanNode;
    };
    logged.push({ query, plan });
  },
  connection: {
    session_preload_libraries: "auto_explain",
    "auto_explain.log_min_duration": "0",
    "auto_explain.log_analyze": true,
    "auto_explain.log_timing": "off",
    "auto_explain.log_format": "json",
    "auto_explain.log_nested_statements": true,
    client_min_messages: "log",
    plan_cache_mode: "force_generic_plan",
  } as Record<string, string | number | boolean>,
});
t.teardown(() => sql.end({ timeout: 1 }));
const database: Database = { sql, close: () => sql.end(), ping: async () => true };

const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

/** A plan as lines of nodes, a table's partitions scanned alike folded into one line with their count. */
function outline(plan: PlanNode, depth = 0): string {
  const table = (node: PlanNode) => (node["Relation Name"] ?? "").replace(/_(p\d+(_\d+)?|default)$/, "_*");
  const ran = (node: PlanNode) => (node["Actual Loops"] ?? 0) > 0;
  const words = [
    plan["Node Type"],
    table(plan),
    plan["Subplan Name"] ?? "",
    plan["Subplans Removed"] === undefined ? "" : `(${plan["Subplans Removed"]} removed)`,
    ran(plan) ? "" : "(never ran)",
  ];
  const lines = [`${"  ".repeat(depth)}${words.filter(Boolean).join(" ")}`];
  const children = plan.Plans ?? [];
  for (let i = 0; i < children.length; ) {
    const child = children[i] as PlanNode;
    let same = i + 1;
    while (
      LOG_PARTITION.test(child["Relation Name"] ?? "") &&
      same < children.length &&
      children[same]?.["Node Type"] === child["Node Type"] &&
      table(children[same] as PlanNode) === table(child)
    )
      same++;
    const alike = children.slice(i, same);
    lines.push(
      alike.length === 1
        ? outline(child, depth + 1)
        : `${"  ".repeat(depth + 1)}${child["Node Type"]} ${table(child)} x${alike.length} (${alike.filter(ran).length} ran)`,
    );
    i = same;
  }
  return lines.join("\n");
}

/** The log partitions a plan ran a node of, by table. */
function touched(plan: PlanNode): Map<string, Set<string>> {
  const byTable = new Map<string, Set<string>>();
  for (const node of nodes(plan)) {
    const match = LOG_PARTITION.exec(node["Relation Name"] ?? "");
    if (!match?.[1] || (node["Actual Loops"] ?? 0) === 0 || RECEIPTS_ALWAYS.has(node["Relation Name"] ?? "")) continue;
    const partitions = byTable.get(match[1]) ?? new Set();
    partitions.add(node["Relation Name"] as string);
    byTable.set(match[1], partitions);
  }
  return byTable;
}

/** The partitions' suffixes, a few of them. */
const suffixes = (table: string, partitions: Set<string>): string => {
  const names = [...partitions].map((name) => name.slice(table.length + 1)).sort();
  return names.length > 4 ? `${names.slice(0, 3).join(", ")}, … ${names.at(-1)}` : names.join(", ");
};

/**
 * What a step is about, and so how many partitions of each log table it may touch: notifications
 * by id (the partitions that hold them), ids and a window of time around each (the partitions
 * the windows overlap), a range of ids (the partitions it overlaps), or the whole log (a sweep,
 * for the reason given).
 */
type About =
  | readonly string[]
  | { ids: readonly string[]; before: string; after: string }
  | { from: string; to: string }
  | { all: string };

async function partitionsOf(about: About): Promise<number> {
  if ("all" in about) return Number.POSITIVE_INFINITY;
  const [row] =
    "from" in about
      ? await admin.sql<{ count: number }[]>`
          select count(*)::int as count from notify_log_partitions
          where not is_default and coalesce(from_id, '') < ${about.to} and to_id > ${about.from}`
      : "ids" in about
        ? await admin.sql<{ count: number }[]>`
            select count(distinct p.suffix)::int as count
            from notify_log_partitions p, unnest(${about.ids as string[]}::text[]) id
            where not p.is_default
              and coalesce(p.from_id, '') < notify_log_bound(notify_log_time(id) + ${about.after}::interval)
              and p.to_id > notify_log_bound(notify_log_time(id) - ${about.before}::interval)`
        : await admin.sql<{ count: number }[]>`
            select count(distinct tableoid)::int as count from notifications where id = any(${about as string[]}::text[])`;
  return Math.max(1, row?.count ?? 0);
}

const report: string[] = [];
/** The statements of the last step. */
let lastLogged: Logged[] = [];

/** A statement in a few words: its CTEs' names, or its start. */
function summary(query: string): string {
  const text = query
    .replace(/--[^\n]*/g, "")
    .replace(/\s+/g, " ")
    .trim();
  const ctes = [...text.matchAll(/(?:^with|\)\s*,)\s+"?(\w+)"?\s+as\s+(?:materialized\s+)?\(/gi)].map((m) => m[1]);
  return ctes.length > 0 ? `with ${ctes.join(", ")}` : text.slice(0, 60);
}

/**
 * Runs `run` and checks every statement it sent (and every statement of a trigger it fired):
 * each touches at most as many partitions of each log table as `about` needs. A statement whose
 * summary is one of `unbounded`'s keys, or starts with it and a comma, may touch every
 * partition, for the reason given.
 */
async function step<T>(
  t: Test,
  name: string,
  about: About,
  run: () => Promise<T>,
  unbounded: Record<string, string> = {},
): Promise<T> {
  logged.length = 0;
  const result = await run();
  const needed = await partitionsOf(about);
  lastLogged = logged.splice(0);
  for (const { query, plan } of lastLogged) {
    const byTable = touched(plan);
    if (byTable.size === 0) continue;
    const statement = `${name}: ${summary(query)}`;
    const counts = [...byTable].map(([table, partitions]) => `${table} ${partitions.size}`).join(", ");
    report.push(`${statement} | ${counts}`);
    const reason =
      "all" in about
        ? about.all
        : Object.entries(unbounded).find(
            ([ctes]) => summary(query) === ctes || summary(query).startsWith(`${ctes},`),
          )?.[1];
    const over = reason === undefined && [...byTable.values()].some((partitions) => partitions.size > needed);
    if (over || process.env.PRUNING_PLANS) t.comment(`${statement}\n${query}\n${outline(plan)}`);
    for (const [table, partitions] of byTable)
      t.ok(
        reason !== undefined || partitions.size <= needed,
        `${statement}: ${partitions.size} partitions of ${table} (${suffixes(table, partitions)}), ${
          reason === undefined ? `its keys need ${needed}` : `any (${reason})`
        }`,
      );
  }
  return result;
}

// A log of 35 and more days with rows in every partition: 4,200 notifications, an email and an
// sms channel each (with their provider ids), two status events and an attempt per channel, a
// fallback chain on every fourth, a receipt for every tenth email, an inbox item for every third
// and every fifth (those one user's, 840 in all, 20 a day) and a broadcast recipient for every
// fifth; some channels still waiting. And 42,000 inbox items of other users' (of no notification
// of the log: a thousand a day), so that each day's inbox is large enough for its indexes to be
// what a planner reads it with.
// The ids are UUIDv7 of their day (ids of the days ahead stand in for the days behind of a
// running log: where a partition lies in the range makes no difference to pruning). The days are
// counted from noon (UTC) of today, not from now: counted from now, how many rows fall before
// today's partition, into the default one, would depend on the hour the test runs at, and with
// it the plans (run at 01:00, the default partition is read by a sequential scan).
await admin.sql`
  create table seed as
  select i, substr(notify_log_bound(at), 1, 14) || '7' || substr(h, 1, 3) || '-8' || substr(h, 4, 3) || '-' || substr(h, 7, 12) as id, at
  from (select i, date_trunc('day', now(), 'UTC') + interval '12 hours' + (i % 42 - 6) * interval '1 day'
          + (i * 37 % 86400) * interval '1 second' as at, md5(i::text) as h
        from generate_series(1, 4200) i) s`;
await admin.sql`
  insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition, created_at)
  select id, 'c', 'u-' || (i % 700), 'account', 'welcome', 'transactional', '{}', id, 'h', 0, at from seed`;
await admin.sql`
  insert into notification_channels (notification_id, channel, status, provider, provider_id, attempts, updated_at, routed_status,
    user_id)
  select id, c.channel, case when i % 20 = 0 then 'retrying' when i % 20 = 1 then 'pending' else 'delivered' end,
         c.provider, c.prefix || i, 1, at, 'pending', 'u-' || (i % 700)
  from seed cross join (values ('email', 'sendgrid', 'sg-'), ('sms', 'plivo', 'pl-')) c(channel, provider, prefix)`;
await admin.sql`
  insert into channel_status_events (notification_id, channel, status, reason, attempt, provider_id, at, user_id)
  select c.notification_id, c.channel, s.status, null, 1, c.provider_id, s.at, c.user_id
  from notification_channels c cross join (values ('retrying', now()), ('delivered', now())) s(status, at)`;
await admin.sql`
  insert into delivery_attempts (notification_id, channel, attempt, outcome, provider, provider_id, error, user_id)
  select notification_id, channel, 1, 'accepted', provider, provider_id, null, user_id from notification_channels`;
await admin.sql`
  insert into notification_fallbacks (notification_id, steps, watching, done_at, user_id)
  select id, '[{"channel": "sms", "when": ["failed"]}]', 'email', case when i % 8 = 0 then null else now() end,
    'u-' || (i % 700)
  from seed where i % 4 = 0`;
await admin.sql`
  insert into provider_receipts (provider, event_id, provider_id, status, reason, payload, notification_id, applied_at)
  select 'sendgrid', 'ev-' || i, 'sg-' || i, 'delivered', null, jsonb_build_object('event', 'delivered', 'notification_id', id), id, now()
  from seed where i % 10 = 0`;
await admin.sql`
  insert into inbox_items (user_id, client_id, notification_id, category, body, read_at, created_at)
  select case when i % 5 = 1 then 'inbox-user' else 'u-' || (i % 700) end, 'c', id, 'account', 'b',
         case when i % 2 = 0 then at end, at
  from seed where i % 3 = 0 or i % 5 = 1 order by at`;
await admin.sql`
  insert into inbox_items (user_id, client_id, notification_id, category, body, read_at, created_at)
  select 'u-' || (i * 10 + k) % 7000, 'c', id || '-' || k, 'account', 'b', case when k % 2 = 0 then at end, at
  from seed cross join generate_series(1, 10) k order by at`;
await admin.sql`vacuum inbox_items`;
await admin.sql`
  insert into broadcast_recipients (broadcast_id, user_id, notification_id)
  select 'b-seed', 'u-' || i, id from seed where i % 5 = 0`;
await admin.sql`drop table seed`;
// An enabled endpoint: the triggers of the channels and fallback chains write their events,
// reading the log as they do.
await admin.sql`
  insert into webhook_endpoints (id, client_id, url, event_types, include, description, secret)
  values ('we-1', 'c', 'https://hooks.example/notify', null, '{notification_data,recipient}', null, 'whsec-test')`;
await admin.sql`analyze`;

const [ranges] = await admin.sql<{ count: number }[]>`
  select count(*)::int as count from notify_log_partitions where from_id is not null and not is_default`;
t.ok((ranges?.count ?? 0) >= 35, `the log has ${ranges?.count} daily partitions`);

const accepted = (over: Partial<AcceptedRow> = {}): AcceptedRow => {
  const id = newId();
  return {
    id,
    client_id: "c",
    key: id,
    request_hash: "h",
    user_id: "hot-user",
    category: "account",
    template_id: "welcome",
    template_version: 1,
    priority: "transactional",
    channels: ["email"],
    data: {},
    partition: 0,
    deliver_by: null,
    fallback: null,
    ...over,
  };
};
const email = (status: "pending" | "deferred" = "pending", at: Date | null = null) => ({
  channel: "email" as const,
  status,
  reason: status === "deferred" ? "quiet_hours" : null,
  nextAttemptAt: at,
});

t.test("a notification's path, from its accept to its receipts, reaches its own partitions", async (t) => {
  const first = accepted({ fallback: [{ channel: "sms", when: ["failed"] }] });
  const second = accepted();
  const third = accepted();
  const fourth = accepted();
  let outboxId: string | null = null;
  await step(t, "accept", [first.id], async () => {
    outboxId = (await acceptNotifications(database, [first, second, third, fourth], 24)).outboxId;
  });
  await step(t, "outbox sweep", [first.id, second.id, third.id, fourth.id], () =>
    sweepPublishOutbox(database, { graceMs: 0, maxIds: 100 }, async () => new Set()),
  );
  const doomed = accepted();
  await step(t, "accept (to remove)", [doomed.id], async () => {
    outboxId = (await acceptNotifications(database, [doomed], 24)).outboxId;
  });
  await step(t, "remove unpublished", [doomed.id], () => removeUnpublished(database, outboxId as string, [doomed.id]));

  const routing = (id: string, over: object = {}) => ({
    notificationId: id,
    clientId: "c",
    userId: "hot-user",
    priority: "transactional",
    channels: [email()],
    deferredUntil: null,
    cap: null,
    order: "hold" as const,
    ...over,
  });
  // Routing looks for the user's previous notification among the ids of the hours before
  // (ORDER_LOOKBACK and ID_CLOCK_SLACK before, ID_CLOCK_SLACK after: channels.ts).
  const around = (id: string) => ({ ids: [id], before: "2 hours", after: "1 hour" });
  const later = new Date(Date.now() - 1000);
  const routed = [
    await step(t, "routing", around(first.id), () => recordRoutedChannels(database, routing(first.id))),
    await step(t, "routing with a cap", around(second.id), () =>
      recordRoutedChannels(database, routing(second.id, { cap: { userId: "hot-user", day: "2030-01-01", cap: 10 } })),
    ),
    await step(t, "routing deferred", around(third.id), () =>
      recordRoutedChannels(database, routing(third.id, { channels: [email("deferred", later)], deferredUntil: later })),
    ),
    await step(t, "routing, reported", around(fourth.id), () =>
      recordRoutedChannels(database, routing(fourth.id, { order: "report" })),
    ),
  ];
  t.same(
    routed.map((r) => r.first),
    [true, true, true, true],
    "each routed",
  );
  t.same(await step(t, "pending channels", [first.id], () => listPendingChannels(database, first.id)), ["email"]);

  // The workers.
  const ref = { notification_id: first.id, channel: "email" as Channel };
  const read = await step(t, "channel read", [first.id], () =>
    loadChannel(sql, { ...ref, user_id: "hot-user", address: "ada@example.com" }),
  );
  t.equal(read?.status, "pending");
  const retried = await step(t, "status move", [first.id], () =>
    moveStatus(sql, ref, "retrying", { attempts: 1, nextAttemptAt: new Date() }),
  );
  t.ok(retried, "moved to retrying");
  const sent = await step(t, "status move with its attempt", [first.id], () =>
    moveStatus(sql, ref, "delivered", {
      provider: "sendgrid",
      providerId: `sg-hot-${first.id}`,
      attempts: 1,
      attempt: { attempt: 1, outcome: "accepted", provider: "sendgrid", providerId: `sg-hot-${first.id}`, error: null },
    }),
  );
  t.ok(sent, "moved to delivered");
  await step(t, "attempt", [first.id], () =>
    recordAttempt(sql, ref, { attempt: 2, outcome: "accepted", provider: "sendgrid", providerId: "x", error: null }),
  );
  const history = await step(t, "delivery history", [first.id], () => readDeliveryHistory(sql, ref));
  t.equal(history.history.length, 2, "both attempts");
  await step(t, "in-app store", [first.id], () =>
    storeInboxItem(sql, { userId: "hot-user", notificationId: first.id, category: "account", title: null, body: "b" }),
  );

  // The receipts.
  const bounced = await step(t, "receipt naming its notification", [first.id], () =>
    recordReceipts(
      sql,
      [
        {
          provider: "sendgrid",
          eventId: `ev-hot-${first.id}`,
          providerId: `sg-hot-${first.id}`,
          status: "bounced",
          reason: "mailbox full",
          payload: { event: "bounce", notification_id: first.id, channel: "email" },
        },
      ],
      { onApplied: () => {} },
    ),
  );
  t.same(bounced, { stored: 1, duplicates: 0, pending: 0 }, "the bounce applied");

  await step(t, "receipt naming no notification", { all: "found by its provider id alone" }, () =>
    recordReceipts(sql, [
      {
        provider: "sendgrid",
        eventId: `ev-open-${first.id}`,
        providerId: `sg-hot-${first.id}`,
        status: null,
        reason: null,
        payload: { event: "open" },
      },
    ]),
  );
  // A receipt ahead of its send: kept, then bound by the channel its payload names.
  const early = await step(
    t,
    "receipt ahead of its send",
    [fourth.id],
    () =>
      recordReceipts(sql, [
        {
          provider: "sendgrid",
          eventId: `ev-early-${fourth.id}`,
          providerId: `sg-early-${fourth.id}`,
          status: "delivered",
          reason: null,
          payload: { event: "delivered", notification_id: fourth.id, channel: "email" },
        },
      ]),
    {
      // The bind never takes a provider id another channel holds, whichever notification's.
      "with input": "a provider id may be held in any partition",
      // applyInRounds's rows carry no payload: a later round finds sends by provider id alone.
      "with input, marked": "sends found by provider id alone",
    },
  );
  t.same(early, { stored: 1, duplicates: 0, pending: 0 }, "bound to the channel it names, and applied");

  // The reads by id.
  const status = await step(t, "status read", [first.id], () => readNotification(database, "c", first.id));
  t.equal(status?.channels.email?.status, "bounced");
  const timeline = await step(t, "timeline read", [first.id], () => readNotificationTimeline(database, first.id));
  t.ok(
    timeline.some((e) => e.event === "receipt"),
    "the timeline shows the receipt",
  );

  // The deferral release.
  const due = await step(t, "due deferrals", [third.id], () => listDueDeferrals(database, new Date(), 10));
  t.same(
    due.map((d) => d.notification_id),
    [third.id],
  );
  await step(t, "deferral release", [third.id], () =>
    releaseDeferrals(database, [third.id], new Date(), async (ops) => {
      await ops.settleChannels([
        { notificationId: third.id, channel: "email", status: "pending", reason: null, nextAttemptAt: null },
      ]);
      await ops.finish([third.id]);
    }),
  );

  // The fallback chain.
  await step(t, "fallback read", [first.id], () => readFallbackRoutable(database, first.id));
  await step(t, "fallback wait", [first.id], () => startFallbackWait(database, first.id, 0, new Date()));
  const stepped = await step(t, "fallback step", [first.id], () =>
    takeFallbackStep(database, {
      notificationId: first.id,
      userId: "hot-user",
      step: 0,
      from: "email",
      because: "failed",
      next: { channel: "sms", status: "pending", reason: null, nextAttemptAt: null },
    }),
  );
  t.ok(stepped, "the chain moved on");
  await step(t, "fallback end", [first.id], () => endFallback(database, first.id, "hot-user", 1));

  // The cancel.
  const canceled = await step(t, "cancel", [second.id], () =>
    cancelNotification(database, { id: second.id, clientId: "c" }, (ops) =>
      ops.cancel(
        ops.channels.map((c) => c.channel),
        "canceled",
        "canceled by the client",
      ),
    ),
  );
  t.same(canceled, { routed: true, result: ["email"] });
  await step(t, "settle pending", [third.id], () =>
    settlePendingChannel(database, { notification_id: third.id, channel: "email" }, "suppressed", "opted out"),
  );
  // Every row the path wrote for its notifications carries their user (migration 0029).
  const hot = [first.id, second.id, third.id, fourth.id];
  const written = await admin.sql<{ table: string; rows: number; without: number }[]>`
    select t.table, count(*)::int as rows, count(*) filter (where t.user_id is null)::int as without from (
      select 'notification_channels' as table, user_id from notification_channels where notification_id = any(${hot})
      union all select 'channel_status_events', user_id from channel_status_events where notification_id = any(${hot})
      union all select 'delivery_attempts', user_id from delivery_attempts where notification_id = any(${hot})
      union all select 'notification_fallbacks', user_id from notification_fallbacks where notification_id = any(${hot})
      union all select 'webhook_completion_checks', user_id from webhook_completion_checks where notification_id = any(${hot})
    ) t group by t.table order by t.table`;
  t.same(
    written.map((w) => w.table),
    [
      "channel_status_events",
      "delivery_attempts",
      "notification_channels",
      "notification_fallbacks",
      "webhook_completion_checks",
    ],
    "the path wrote rows of each table",
  );
  t.same(
    written.filter((w) => w.without > 0),
    [],
    "none without its user",
  );
  const checked = await step(t, "completion checks", [first.id, second.id, third.id, fourth.id], () =>
    checkCompletions(database, 100),
  );
  t.ok(checked > 0, `${checked} completion checks taken`);

  // A webhook post of one of its events, with the notification's data and the user's address.
  const [owed] = await admin.sql<{ event_id: number; run: number }[]>`
    select d.event_id::int, d.run from webhook_deliveries d join webhook_events e on e.id = d.event_id
    where e.notification_id = ${first.id} limit 1`;
  const claimed = await step(t, "webhook claim", [first.id], () =>
    claimDelivery(database, { endpointId: "we-1", eventId: owed?.event_id ?? 0, run: owed?.run ?? 0, attempt: 1 }),
  );
  t.ok(typeof claimed === "object", "claimed");
});

t.test("the sweeps read the range they cover", async (t) => {
  const unrouted = accepted();
  await acceptNotifications(database, [unrouted], 24);
  const from = unrouted.id.slice(0, 8);
  const range = {
    from: `${from}-0000-0000-0000-000000000000`,
    to: `${(Number.parseInt(from, 16) + 1).toString(16).padStart(8, "0")}-0000-0000-0000-000000000000`,
  };
  await step(t, "unrouted sweep", range, () =>
    findUnroutedNotifications(database, { from: range.from, before: range.to, limit: 100 }),
  );
  let found: Awaited<ReturnType<typeof findWaitingChannels>> = [];
  await step(t, "waiting channels sweep", { all: "a channel may wait in any partition" }, async () => {
    found = await findWaitingChannels(database, { before: new Date(), limit: 10 });
  });
  const waiting = found[0];
  if (waiting) {
    const id = waiting.message.notification_id;
    await step(t, "touch waiting channel", [id], () => touchWaitingChannel(database, waiting));
    await step(t, "settle waiting channel", [id], () =>
      settleWaitingChannel(database, { ...waiting, updatedAt: new Date(0) }, { status: "suppressed", reason: "x" }),
    );
  }
  await step(t, "in-app settle sweep", { all: "an in-app send may be unsettled in any partition" }, () =>
    settleInAppFromInbox(database, new Date(), 10),
  );
  await step(t, "open fallbacks sweep", { all: "a chain may be open in any partition" }, () =>
    listOpenFallbacks(database, new Date(), 10),
  );
  // Receipts kept before their sends were recorded: one whose send now is, one naming its channel.
  const [kept] = await admin.sql<{ notification_id: string; provider_id: string }[]>`
    select notification_id, provider_id from notification_channels where provider = 'sendgrid' limit 1`;
  const late = accepted();
  await acceptNotifications(database, [late], 24);
  await admin.sql`insert into notification_channels (notification_id, channel, status) values (${late.id}, 'email', 'pending')`;
  await admin.sql`
    insert into provider_receipts (provider, event_id, provider_id, status, reason, payload)
    values ('sendgrid', 'ev-kept', ${kept?.provider_id ?? ""}, 'bounced', null, '{}'),
           ('sendgrid', 'ev-named', 'sg-named', 'delivered', null,
            ${admin.sql.json({ notification_id: late.id, channel: "email" })})`;
  await step(t, "pending receipts sweep", { all: "a receipt may wait for any send" }, () =>
    applyPendingReceipts(sql, 10),
  );
});

t.test("a batch of status moves across a day reaches its channels by key, not the day's range", async (t) => {
  // A busy day: 10,000 notifications with a pending email each (their plans see the day's size).
  // A batch of moves of its first and last spans every channel row of the day.
  await admin.sql`
    insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition, created_at)
    select id, 'c', 'busy-' || i, 'account', 'welcome', 'transactional', '{}', id, 'h', 0, at
    from (select i, at, substr(notify_log_bound(at), 1, 14) || '7' || substr(h, 1, 3) || '-8' || substr(h, 4, 3) || '-' || substr(h, 7, 12) as id
          from (select i, date_trunc('day', now()) + interval '30 days' + i * interval '8 seconds' as at, md5('busy' || i) as h
                from generate_series(1, 10000) i) s) s`;
  await admin.sql`
    insert into notification_channels (notification_id, channel, status, routed_status, user_id)
    select id, 'email', 'pending', 'pending', user_id from notifications where user_id like 'busy-%'`;
  await admin.sql`analyze notifications, notification_channels`;
  const [day] = await admin.sql<{ first: string; last: string }[]>`
    select min(id) as first, max(id) as last from notifications where user_id like 'busy-%'`;
  if (!day) throw new Error("no busy day");
  const users = await admin.sql<{ id: string; user_id: string }[]>`
    select id, user_id from notifications where id in ${admin.sql([day.first, day.last])} order by id`;
  // As a worker names them: with the user its work item carries.
  const refs = users.map((n) => ({ notification_id: n.id, channel: "email" as Channel, user_id: n.user_id }));
  const moved = await step(
    t,
    "batched status moves",
    refs.map((r) => r.notification_id),
    () =>
      Promise.all(
        refs.map((ref, i) =>
          moveStatus(sql, ref, "delivered", {
            provider: "sendgrid",
            providerId: `sg-batch-${i}`,
            attempts: 1,
            attempt: {
              attempt: 1,
              outcome: "accepted",
              provider: "sendgrid",
              providerId: `sg-batch-${i}`,
              error: null,
            },
          }),
        ),
      ),
  );
  t.same(moved, [true, true], "both moved");
  const lines = await admin.sql<{ user_id: string }[]>`
    select user_id from delivery_attempts where provider_id like 'sg-batch-%' order by notification_id`;
  t.same(
    lines.map((l) => l.user_id),
    refs.map((r) => r.user_id),
    "each attempt line has its user",
  );
  // The attempt lines take the user they were given: they look no channel row up.
  const attemptsNode = lastLogged
    .flatMap(({ plan }) => nodes(plan))
    .find((node) => node["Node Type"] === "ModifyTable" && node["Relation Name"] === "delivery_attempts");
  t.ok(attemptsNode, "the attempt lines' insert ran");
  t.notOk(
    nodes(attemptsNode as PlanNode).some(
      (node) => (node["Relation Name"] ?? "").startsWith("notification_channels_") && (node["Actual Loops"] ?? 0) > 0,
    ),
    "the attempt lines read no channel row",
  );
  // Each scan of the channels reads at most a few rows per key.
  for (const { query, plan } of lastLogged) {
    for (const node of nodes(plan)) {
      if (!(node["Relation Name"] ?? "").startsWith("notification_channels_") || (node["Actual Loops"] ?? 0) === 0)
        continue;
      const read = ((node["Actual Rows"] ?? 0) + (node["Rows Removed by Filter"] ?? 0)) * (node["Actual Loops"] ?? 0);
      t.ok(
        read <= 2 * refs.length,
        `${node["Node Type"]} ${node["Relation Name"]} read ${read} rows for ${refs.length} keys`,
        {
          ...(read > 2 * refs.length ? { query, plan: outline(plan) } : {}),
        },
      );
    }
  }
});

t.test("a user's inbox reads every partition through its indexes, at most a page from each", async (t) => {
  const owner = { userId: "inbox-user", clientId: "c" };
  const PAGE = 5;
  const [spread] = await admin.sql<{ count: number }[]>`
    select count(distinct tableoid)::int as count from inbox_items where user_id = ${owner.userId}`;
  t.ok((spread?.count ?? 0) >= 35, `the user's items are in ${spread?.count} partitions`);
  /**
   * Each scan of a partition of the inbox that ran is by index (an index scan or a bitmap heap
   * scan of one) and read at most `most` items of it (those it returned and those its filter
   * passed over).
   */
  const bounded = async <T>(name: string, most: number, run: () => Promise<T>): Promise<T> => {
    const result = await step(t, name, { all: "a user's inbox spans every partition" }, run);
    let scans = 0;
    for (const { query, plan } of [...lastLogged]) {
      for (const node of nodes(plan)) {
        const relation = node["Relation Name"] ?? "";
        if (!relation.startsWith("inbox_items_") || (node["Actual Loops"] ?? 0) === 0) continue;
        scans++;
        const read = (node["Actual Rows"] ?? 0) + (node["Rows Removed by Filter"] ?? 0);
        if (node["Node Type"] === "Seq Scan" || read > most)
          t.fail(`${name}: ${node["Node Type"]} ${relation} read ${read} items, at most ${most}`, {
            query,
            plan: outline(plan),
          });
      }
    }
    t.ok(scans >= 35, `${name}: ${scans} partition scans, each by index, at most ${most} items each`);
    return result;
  };
  const page = await bounded("inbox page", PAGE + 1, () => listInboxItems(database, owner, "inbox", PAGE, null));
  t.equal(page.items.length, PAGE);
  t.ok(page.hasMore);
  const before = Number(page.items.at(-1)?.id);
  await bounded("inbox next page", PAGE + 1, () => listInboxItems(database, owner, "inbox", PAGE, before));
  await bounded("unread page", PAGE + 1, () => listInboxItems(database, owner, "unread", PAGE, null));
  await bounded("items after", PAGE, () => listInboxItemsAfter(database, owner, before - 200, PAGE));
  const latest = await bounded("latest item", 1, () => latestInboxItemId(database, owner));
  t.equal(latest, Number(page.items[0]?.id), "the newest item");
  await bounded("newest item stored", 1, () => inboxItemsSince(database, null, []));
  await bounded("recent categories", 3, () => recentInboxCategories(database, owner, 3));
  await bounded("mark one", 1, () => setInboxItemState(database, owner, latest, { read: true }));
  // Counted and marked whole: every item of the user is read, from the indexes.
  const items = 840;
  const counts = await bounded("counts", items, () => countInboxItems(database, owner));
  t.ok(counts.total > 0 && counts.unread > 0, JSON.stringify(counts));
  t.equal(await bounded("mark all", items, () => markAllInboxItems(database, owner, "read", null)), counts.unread);
});

t.test("the hot statements set up a scan only of the partitions their notifications are in", async (t) => {
  // Pruning per row of a nested loop comes after the executor has set up a scan of every
  // partition of the table, which costs the server about 4 µs a partition and scan on every run
  // (a millisecond a statement with 90 days kept): the statements every email passes through
  // bound their lookups by their batch's ids as well, which the executor prunes by before it sets
  // any scan up. Every partition node in a plan was set up, whether it ran or not.
  const setUp = (plan: PlanNode): Map<string, Set<string>> => {
    const byTable = new Map<string, Set<string>>();
    for (const node of nodes(plan)) {
      const match = LOG_PARTITION.exec(node["Relation Name"] ?? "");
      if (!match?.[1] || RECEIPTS_ALWAYS.has(node["Relation Name"] ?? "")) continue;
      byTable.set(match[1], (byTable.get(match[1]) ?? new Set()).add(node["Relation Name"] as string));
    }
    return byTable;
  };
  const check = async <T>(name: string, about: About, run: () => Promise<T>): Promise<T> => {
    logged.length = 0;
    const result = await run();
    const needed = await partitionsOf(about);
    const plans = logged.splice(0).filter(({ query }) => !/webhook/i.test(query));
    t.ok(plans.length > 0, `${name}: its statements were logged`);
    for (const { query, plan } of plans) {
      for (const [table, partitions] of setUp(plan)) {
        const ok = partitions.size <= needed;
        if (!ok || process.env.PRUNING_PLANS) t.comment(`${name}: ${summary(query)}\n${outline(plan)}`);
        t.ok(
          ok,
          `${name}: ${summary(query)} set up ${partitions.size} partitions of ${table}, its notifications need ${needed}`,
        );
      }
    }
    return result;
  };
  // The bounds are found in JavaScript for a database that orders ids as JavaScript does, as
  // createDb asks of each pool it makes (this test's pool is its own).
  t.ok(await probeIdOrder(sql), "this database orders ids as JavaScript does");
  const rows = [accepted({ user_id: "setup-user" }), accepted({ user_id: "setup-user-2" })];
  const doubt = accepted({ user_id: "setup-user" });
  await acceptNotifications(database, [...rows, doubt], 24);
  const ids = rows.map((r) => r.id);
  // Routing looks for each user's previous notification up to two hours before its own.
  const routed = await check("routing", { ids, before: "2 hours", after: "1 hour" }, () =>
    Promise.all(
      rows.map((r) =>
        recordRoutedChannels(database, {
          notificationId: r.id,
          clientId: r.client_id,
          userId: r.user_id,
          priority: r.priority,
          channels: [email()],
          deferredUntil: null,
          cap: null,
        }),
      ),
    ),
  );
  t.same(
    routed.map((r) => r.first),
    [true, true],
    "both were routed",
  );
  const inDoubt = await check(
    "routing in doubt of order",
    { ids: [doubt.id], before: "2 hours", after: "1 hour" },
    () =>
      recordRoutedChannels(database, {
        notificationId: doubt.id,
        clientId: "c",
        userId: "setup-user",
        priority: "transactional",
        channels: [email()],
        deferredUntil: null,
        cap: null,
        order: "hold",
      }),
  );
  t.match(inDoubt, { first: true, held: false, earlier: null }, "routed: the user's previous one is routed");
  const read = await check("the worker's read", ids, () =>
    Promise.all(
      rows.map((r) =>
        loadChannel(database.sql, {
          notification_id: r.id,
          channel: "email",
          user_id: r.user_id,
          address: "a@example.com",
        }),
      ),
    ),
  );
  t.same(
    read.map((r) => r?.status),
    ["pending", "pending"],
    "both channels were found",
  );
  const moved = await check("the worker's status move", ids, () =>
    Promise.all(
      rows.map((r, i) =>
        moveStatus(
          database.sql,
          { notification_id: r.id, channel: "email", user_id: i === 0 ? r.user_id : undefined },
          "delivered",
          {
            provider: "sendgrid",
            providerId: `sg-${r.id}`,
            attempts: 1,
            attempt: { attempt: 1, outcome: "accepted", provider: "sendgrid", providerId: `sg-${r.id}`, error: null },
          },
        ),
      ),
    ),
  );
  t.same(moved, [true, true], "both channels moved");
  const received = await check("the receipts", ids, () =>
    recordReceipts(
      database.sql,
      rows.map((r) => ({
        provider: "sendgrid",
        eventId: `ev-setup-${r.id}`,
        providerId: `sg-${r.id}`,
        status: "delivered" as const,
        reason: null,
        payload: { event: "delivered", notification_id: r.id, channel: "email" },
      })),
    ),
  );
  t.match(received, { stored: 2, duplicates: 0, pending: 0 }, "both receipts were stored and applied");
});

t.test("the statements and the partitions they touched", async (t) => {
  t.comment(report.join("\n"));
  t.pass();
});
