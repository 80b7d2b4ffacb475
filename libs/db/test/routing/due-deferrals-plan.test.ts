import { countingDatabase, freshDatabase } from "@notify/testing";
import t from "tap";
import { listDueDeferrals, releaseDeferrals } from "../../src/index.js";

// Many notifications due at one instant (a campaign scheduled for 09:00) on a database without
// statistics: each batch of due timers reads its notifications and channels by key. A generic
// plan of one join hashed every notification and intersected each one's channels with the
// reconciler's index of every waiting channel, reading the whole table once per row.

const { database, url } = await freshDatabase(t);
const { sql } = database;
const statements: Array<{ query: string; parameters: readonly unknown[] }> = [];
const captured = await countingDatabase(t, url, (query, parameters) => statements.push({ query, parameters }));
const DUE = 10_000;
const due = new Date("2026-06-01T09:00:00Z");

interface PlanNode {
  "Node Type": string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Shared Hit Blocks"?: number;
  "Shared Read Blocks"?: number;
  Plans?: PlanNode[];
}
const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

/** The plan a prepared statement keeps (a generic one) for `query` run with `args`. */
async function genericPlan(query: string, args: string): Promise<PlanNode[]> {
  return sql.begin(async (tx) => {
    await tx.unsafe(`prepare probe as ${query}`);
    await tx`set local plan_cache_mode = force_generic_plan`;
    const [row] = await tx.unsafe(`explain (format json) execute probe(${args})`);
    await tx.unsafe("deallocate probe");
    const [explained] = (row?.["QUERY PLAN"] ?? []) as Array<{ Plan: PlanNode }>;
    if (!explained) throw new Error("EXPLAIN gave no plan");
    return nodes(explained.Plan);
  }) as Promise<PlanNode[]>;
}

t.test("a batch of due deferrals reads its rows by key, on the plan a prepared statement keeps", async (t) => {
  await sql`
    insert into notifications (id, client_id, user_id, category, template_id, priority, data, dedup_key, request_hash, partition)
    select 'n-' || lpad(i::text, 6, '0'), 'c', 'u-' || (i % 1000), 'account', 'welcome', 'transactional', '{}', 'n-' || i, 'h', 0
    from generate_series(1, ${DUE}) i`;
  await sql`
    insert into notification_channels (notification_id, channel, status, reason, next_attempt_at)
    select id, 'email', 'deferred', 'scheduled', ${due} from notifications`;
  await sql`insert into deferred_notifications (notification_id, user_id, due_at) select id, user_id, ${due} from notifications`;

  const batch = await listDueDeferrals(captured, due, 100);
  t.equal(batch.length, 100);
  t.same(batch[0]?.channels, ["email"]);
  t.equal(batch[0]?.notification_id, "n-000001", "oldest first, then by id");

  const statement = statements.findLast((s) => s.query.includes("deferred_notifications"));
  if (!statement) throw new Error("no statement read deferred_notifications");
  const plan = await genericPlan(statement.query, `'${due.toISOString()}', 100`);
  const described = plan.map((n) => `${n["Node Type"]} ${n["Relation Name"] ?? ""} ${n["Index Name"] ?? ""}`.trim());
  t.notOk(
    plan.some((n) => n["Node Type"] === "Seq Scan" || n["Node Type"] === "Hash"),
    `no table read whole: ${described.join("; ")}`,
  );
  t.notOk(
    plan.some((n) => n["Index Name"] === "notification_channels_waiting_idx"),
    "each notification's channels by its key alone, not with every waiting channel",
  );
});

t.test("a release locks its channels by key, not through the index of every waiting channel", async (t) => {
  const ids = ["n-000001", "n-000002", "n-000003"];
  statements.length = 0;
  await releaseDeferrals(captured, ids, due, async (tx) => {
    t.ok(tx.isDeferred("n-000001", "email"));
    return null;
  });
  const statement = statements.find(
    (s) => s.query.includes("from notification_channels") && s.query.includes("for update"),
  );
  if (!statement) throw new Error("no statement locked channel rows");
  // The ids, for each of its parameters (their match, and their range: log-keys.ts).
  const plan = await genericPlan(statement.query, statement.parameters.map(() => `'{${ids.join(",")}}'`).join(", "));
  t.notOk(
    plan.some((n) => n["Index Name"] === "notification_channels_waiting_idx" || n["Node Type"] === "Seq Scan"),
    plan.map((n) => `${n["Node Type"]} ${n["Index Name"] ?? ""}`).join("; "),
  );
});

t.test("a round's next batch starts after the last timer of the one before", async (t) => {
  // The first half of the round released and their timers deleted, as its batches do.
  const done = await sql<{ notification_id: string; due_at: Date }[]>`
    delete from deferred_notifications where notification_id in (
      select notification_id from deferred_notifications order by due_at, notification_id limit ${DUE / 2})
    returning notification_id, due_at`;
  const lastDone = done
    .map((r) => r.notification_id)
    .sort()
    .at(-1) as string;
  const buffers = async (after: { dueAt: Date; id: string } | null) => {
    statements.length = 0;
    const batch = await listDueDeferrals(captured, due, 100, after);
    const statement = statements.findLast((s) => s.query.includes("deferred_notifications"));
    if (!statement) throw new Error("no statement read deferred_notifications");
    const [row] = await sql.unsafe(
      `explain (analyze, buffers, format json) ${statement.query}`,
      statement.parameters as never[],
    );
    const [explained] = (row?.["QUERY PLAN"] ?? []) as Array<{ Plan: PlanNode }>;
    if (!explained) throw new Error("EXPLAIN gave no plan");
    // The timers' own scan: what it reads grows with the timers deleted before its start.
    const scan = nodes(explained.Plan).find((n) => n["Relation Name"] === "deferred_notifications");
    return {
      first: batch[0]?.notification_id,
      blocks: (scan?.["Shared Hit Blocks"] ?? 0) + (scan?.["Shared Read Blocks"] ?? 0),
    };
  };
  const resumed = await buffers({ dueAt: due, id: lastDone });
  t.equal(resumed.first, `n-${String(DUE / 2 + 1).padStart(6, "0")}`, "the next due timer");
  const fromStart = await buffers(null);
  t.equal(fromStart.first, resumed.first, "the same batch either way");
  t.ok(
    resumed.blocks * 3 < fromStart.blocks,
    `resumed: ${resumed.blocks} blocks read, against ${fromStart.blocks} stepping over the ${DUE / 2} deleted`,
  );
});
