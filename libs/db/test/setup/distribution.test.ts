import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { freshDatabase, idAt } from "@notify/testing";
import t from "tap";
import { TABLE_DISTRIBUTION, UNSCOPED_STATEMENTS } from "../../src/setup/distribution.js";

// The schema's plan for a PostgreSQL distributed by user (libs/db/src/setup/distribution.ts,
// docs/capacity.md "Sharded by user"), held to the migrated schema and to the statements, so
// that a table or a statement added without a decision fails here instead of eroding the plan.
const { database } = await freshDatabase(t);
const { sql } = database;

const SOURCE = join(dirname(fileURLToPath(import.meta.url)), "../../src");

/** The tables of the migrated database: plain and partitioned, not their partitions. */
const tables = (
  await sql<{ name: string }[]>`
    select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition order by 1`
).map((row) => row.name);

/** Each table's columns: their type and whether they are NOT NULL. */
const columns = new Map<string, { type: string; notNull: boolean }>(
  (
    await sql<{ table: string; column: string; type: string; not_null: boolean }[]>`
      select c.relname as table, a.attname as column, format_type(a.atttypid, a.atttypmod) as type,
        a.attnotnull as not_null
      from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition
        and a.attnum > 0 and not a.attisdropped`
  ).map((row) => [`${row.table}.${row.column}`, { type: row.type, notNull: row.not_null }]),
);

t.test("every table of the schema is classified, and every classified table exists", async (t) => {
  const classified = Object.keys(TABLE_DISTRIBUTION);
  t.same(
    tables.filter((table) => !classified.includes(table)),
    [],
    "a table the migrations add has its entry in TABLE_DISTRIBUTION (libs/db/src/setup/distribution.ts)",
  );
  t.same(
    classified.filter((table) => !tables.includes(table)),
    [],
    "a table TABLE_DISTRIBUTION lists is in the schema",
  );
});

t.test("a table distributed by a column has it, NOT NULL, of one type within its group", async (t) => {
  const userColumnTypes = new Set<string>();
  for (const [table, plan] of Object.entries(TABLE_DISTRIBUTION)) {
    if (plan.kind !== "by-user" && plan.kind !== "by-key") continue;
    const column = columns.get(`${table}.${plan.column}`);
    t.ok(column, `${table} has ${plan.column}`);
    // A log table's user_id is null on the rows written before migration 0029 (the next test
    // holds every later row to it).
    if (plan.kind !== "by-user" || plan.filledFrom === undefined)
      t.ok(column?.notNull, `${table}.${plan.column} is NOT NULL (a distribution column holds no null)`);
    if (plan.kind === "by-user" && column) userColumnTypes.add(column.type);
    if (plan.kind === "by-key" && plan.colocateWith !== undefined) {
      const group = TABLE_DISTRIBUTION[plan.colocateWith];
      t.equal(group?.kind, "by-key", `${table} goes with ${plan.colocateWith}, distributed by a key of its own`);
      if (group?.kind === "by-key")
        t.equal(
          column?.type,
          columns.get(`${plan.colocateWith}.${group.column}`)?.type,
          `${table}.${plan.column} is of ${plan.colocateWith}.${group.column}'s type (co-located)`,
        );
    }
  }
  t.same([...userColumnTypes], ["text"], "every by-user table's user_id is text: one co-location group");
});

t.test("a log table's user_id is required of every row of a notification past the cut", async (t) => {
  // The tables whose user_id is null on rows written before migration 0029: each checks, NOT VALID
  // (no old row is read), that a row of a later notification id carries its user, and a partition
  // made later has the check too. Shrinks as the backfill lets a table's user_id become NOT NULL.
  const filled = Object.entries(TABLE_DISTRIBUTION)
    .filter(([, plan]) => plan.kind === "by-user" && plan.filledFrom !== undefined)
    .map(([table]) => table)
    .sort();
  t.same(
    filled,
    [
      "channel_status_events",
      "delivery_attempts",
      "digest_items",
      "notification_channels",
      "notification_fallbacks",
      "webhook_completion_checks",
    ],
    "the pinned list (edit it only to remove a table whose user_id became NOT NULL)",
  );
  const [made] = await sql<{ made: number }[]>`
    select notify_log_extend(max(to_at) + interval '2 days', interval '1 day') as made from notify_log_partitions`;
  t.ok((made?.made ?? 0) > 0, "the log has partitions made after the migration");
  const checks = await sql<{ table: string; def: string; valid: boolean }[]>`
    select c.relname as table, pg_get_constraintdef(k.oid) as def, k.convalidated as valid
    from pg_constraint k join pg_class c on c.oid = k.conrelid join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public' and k.contype = 'c' and k.conname = c.relname || '_user_id_check'
      and not c.relispartition`;
  t.same(checks.map((c) => c.table).sort(), filled, "each table has its user_id check");
  const cuts = new Set(checks.map((c) => /< '([^']+)'/.exec(c.def)?.[1]));
  t.equal(cuts.size, 1, "one cut for all");
  const cut = [...cuts][0] ?? "";
  t.ok(
    checks.every((c) => !c.valid),
    "not validated: no row written before it was read",
  );
  const [bounds] = await sql<{ last: string; cut_at: Date }[]>`
    select max(to_id) as last, notify_log_time(${cut}) as cut_at from notify_log_partitions`;
  const cutAt = bounds?.cut_at.getTime() ?? 0;
  t.ok(cutAt > Date.now() + 23 * 3_600_000, "the cut is a day or more ahead of the migration");
  const later = idAt(cutAt + 86_400_000);
  const earlier = idAt(Date.now() - 1000);
  t.ok(later >= cut && later < (bounds?.last ?? ""), "a notification id past the cut, in a partition made later");
  const rows: Record<string, (id: string, user: string | null) => Promise<unknown>> = {
    notification_channels: (id, user) =>
      sql`insert into notification_channels (notification_id, channel, status, user_id) values (${id}, 'email', 'pending', ${user})`,
    channel_status_events: (id, user) =>
      sql`insert into channel_status_events (notification_id, channel, status, attempt, user_id) values (${id}, 'email', 'pending', 0, ${user})`,
    delivery_attempts: (id, user) =>
      sql`insert into delivery_attempts (notification_id, channel, attempt, outcome, user_id) values (${id}, 'email', 1, 'accepted', ${user})`,
    notification_fallbacks: (id, user) =>
      sql`insert into notification_fallbacks (notification_id, steps, watching, user_id) values (${id}, '[]', 'email', ${user})`,
    digest_items: (id, user) =>
      sql`insert into digest_items (notification_id, digest_id, user_id) values (${id}, 'd', ${user})`,
    webhook_completion_checks: (id, user) =>
      sql`insert into webhook_completion_checks (notification_id, user_id) values (${id}, ${user})`,
  };
  for (const table of filled) {
    const insert = rows[table];
    if (!insert) {
      t.fail(`${table}: a row to try`);
      continue;
    }
    await t.rejects(
      insert(later, null),
      { code: "23514" },
      `${table}: a later notification's row without its user is refused`,
    );
    await t.resolves(insert(later, "u1"), `${table}: with its user it goes in`);
    await t.resolves(insert(earlier, null), `${table}: a row of an earlier notification may lack it`);
    await t.resolves(insert(randomUUID(), null), `${table}: so may one of an id no service makes (not a UUIDv7)`);
  }
});

/** The TypeScript files under `dir`. */
function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return path.endsWith(".ts") ? [path] : [];
  });
}

/**
 * The outermost template literals of a TypeScript source, with where each starts: a small
 * scanner that skips comments and quoted strings and follows `${...}` into nested templates. A
 * tagged template of libs/db is a statement or a fragment of one.
 */
function templateLiterals(source: string): Array<{ start: number; text: string }> {
  const found: Array<{ start: number; text: string }> = [];
  let i = 0;
  const code = (inExpression: boolean): void => {
    let depth = 0;
    while (i < source.length) {
      const c = source[i];
      if (c === "/" && source[i + 1] === "/") {
        const end = source.indexOf("\n", i);
        i = end < 0 ? source.length : end;
      } else if (c === "/" && source[i + 1] === "*") {
        const end = source.indexOf("*/", i + 2);
        i = end < 0 ? source.length : end + 2;
      } else if (c === "'" || c === '"') {
        i++;
        while (i < source.length && source[i] !== c) i += source[i] === "\\" ? 2 : 1;
        i++;
      } else if (c === "`") {
        const start = i;
        template();
        if (!inExpression) found.push({ start, text: source.slice(start, i) });
      } else {
        if (c === "{") depth++;
        if (c === "}") {
          if (inExpression && depth === 0) {
            i++;
            return;
          }
          depth--;
        }
        i++;
      }
    }
  };
  const template = (): void => {
    i++;
    while (i < source.length) {
      const c = source[i];
      if (c === "\\") i += 2;
      else if (c === "`") {
        i++;
        return;
      } else if (c === "$" && source[i + 1] === "{") {
        i += 2;
        code(true);
      } else i++;
    }
  };
  code(false);
  return found;
}

/** One statement (or fragment) naming a by-user table, as the check below reads it. */
interface Mention {
  /** `<file under libs/db/src>#<top-level function or constant>`, as UNSCOPED_STATEMENTS keys it. */
  at: string;
  line: number;
  table: string;
  scoped: boolean;
}

const BY_USER_TABLES = Object.entries(TABLE_DISTRIBUTION)
  .filter(([, plan]) => plan.kind === "by-user")
  .map(([table]) => table);

/**
 * The statements of one source (`file`, under libs/db/src) that read or write a by-user table
 * (`from`, `join`, `update`, `into`, `using` and its name), and whether each names `user_id`. A
 * constant of the same file that a statement interpolates (`${mine}`, `${digestOf(sql)}`,
 * `${sql.unsafe(COLUMNS)}`) counts as part of its text.
 */
function mentionsIn(source: string, file: string): Mention[] {
  const out: Mention[] = [];
  const literals = templateLiterals(source);
  // The file's constants a statement may interpolate: a template (a fragment) or a string.
  const constants = new Map<string, string>();
  for (const { start, text } of literals) {
    const named = /const\s+(\w+)\s*(?::[^=]*)?=[^;`]*$/.exec(source.slice(Math.max(0, start - 300), start));
    if (named?.[1] && !constants.has(named[1])) constants.set(named[1], text);
  }
  for (const [, name, text] of source.matchAll(/const\s+(\w+)\s*=\s*("[^"\n]*")/g))
    if (name && text) constants.set(name, text);
  const declarations = [...source.matchAll(/^(?:export\s+)?(?:async\s+)?(?:function\s+(\w+)|const\s+(\w+))/gm)];
  for (const { start, text } of literals) {
    let statement = text;
    for (let round = 0; round < 2; round++)
      for (const [, expression] of statement.matchAll(/\$\{([^{}]*)\}/g))
        for (const [name] of (expression ?? "").matchAll(/\w+/g))
          if (constants.has(name) && !statement.includes(`/*${name}*/`))
            statement += `/*${name}*/${constants.get(name)}`;
    const scoped = /\buser_id\b/.test(statement);
    const declaration = declarations.filter((d) => (d.index ?? 0) < start).at(-1);
    const at = `${file}#${declaration?.[1] ?? declaration?.[2] ?? "?"}`;
    const line = source.slice(0, start).split("\n").length;
    for (const table of BY_USER_TABLES)
      if (new RegExp(`\\b(from|join|update|into|using)\\s+${table}\\b`, "i").test(text))
        out.push({ at, line, table, scoped });
  }
  return out;
}

/** Every such statement of libs/db/src. */
const mentions = (): Mention[] =>
  sources(SOURCE).flatMap((file) => mentionsIn(readFileSync(file, "utf8"), relative(SOURCE, file)));

t.test("the scanner finds statements on by-user tables, and user_id in them or their fragments", async (t) => {
  const source = [
    "// `from notifications` in a comment is no statement",
    "const mine = sql`user_id = #{owner}`;",
    "const other = sql`client_id = #{client}`;",
    "export async function a() {",
    '  const quoted = "`from notifications`";',
    "  await sql`select 1 from notifications where #{mine} and id = #{sql`#{id}`}`;",
    "}",
    "export const b = async () => {",
    "  await sql`update inbox_items set read_at = now() where #{other}`;",
    "  await sql`delete from templates where id = #{id}`;",
    "};",
  ]
    .join("\n")
    .replaceAll("#", "$");
  t.equal(templateLiterals(source).length, 5, "the fragments and the statements, the nested template inside one");
  t.same(mentionsIn(source, "x.ts"), [
    { at: "x.ts#a", line: 6, table: "notifications", scoped: true },
    { at: "x.ts#b", line: 9, table: "inbox_items", scoped: false },
  ]);
});

t.test("every statement on a by-user table names user_id, or is pinned with its reason", async (t) => {
  // A tripwire, not a proof: a statement that names user_id anywhere (a column it returns) passes,
  // and SQL built outside a template literal of libs/db/src is not read. It catches the common
  // slip, a new statement on a user's rows that reaches them by another key alone.
  const found = mentions();
  t.ok(found.length > 50, `the scan reads the statements (${found.length} found)`);
  const pinned = new Set(UNSCOPED_STATEMENTS.map((s) => `${s.at} ${s.table}`));
  t.equal(pinned.size, UNSCOPED_STATEMENTS.length, "each (statement, table) is pinned once");
  const unscoped = found.filter((m) => !m.scoped);
  t.same(
    unscoped.filter((m) => !pinned.has(`${m.at} ${m.table}`)).map((m) => `${m.at}:${m.line} ${m.table}`),
    [],
    "a statement on a by-user table names user_id, or is in UNSCOPED_STATEMENTS (distribution.ts) with its reason",
  );
  const hit = new Set(unscoped.map((m) => `${m.at} ${m.table}`));
  t.same(
    [...pinned].filter((key) => !hit.has(key)),
    [],
    "every pinned statement still reaches its table without user_id (remove the entries that do not)",
  );
  for (const entry of UNSCOPED_STATEMENTS) t.ok(entry.why.length > 20, `${entry.at} ${entry.table} says why`);
});
