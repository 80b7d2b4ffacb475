import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { freshDatabase } from "@notify/testing";
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

t.test("the tables still missing the user id are exactly the pinned ones, each with its key", async (t) => {
  // Shrinks as tables gain user_id, and never grows silently: a new table of a user's rows
  // carries the user id from the start.
  const missing = Object.entries(TABLE_DISTRIBUTION).flatMap(([table, plan]) =>
    plan.kind === "by-user-missing" ? [{ table, key: plan.key }] : [],
  );
  t.same(
    missing.map((m) => m.table).sort(),
    [
      "channel_status_events",
      "delivery_attempts",
      "digest_items",
      "notification_channels",
      "notification_fallbacks",
      "webhook_completion_checks",
    ],
    "the pinned list (edit it only to remove a table that gained user_id)",
  );
  for (const { table, key } of missing) {
    t.ok(columns.get(`${table}.${key}`)?.notNull, `${table} is reached by ${key}, NOT NULL`);
    t.notOk(columns.has(`${table}.user_id`), `${table} has no user_id yet (else it is by-user)`);
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
