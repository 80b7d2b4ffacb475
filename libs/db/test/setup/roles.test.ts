import { randomBytes } from "node:crypto";
import { freshAppRoles, freshDatabase, seedNotification, TEST_PG_URL } from "@notify/testing";
import postgres from "postgres";
import t from "tap";
import { purgeExpiredIdempotencyKeys } from "../../src/accept/idempotency.js";
import {
  detachedLines,
  detachedPartitions,
  detachPartition,
  dropDetached,
  extendIdempotencyKeys,
  extendLog,
  logPartitions,
  retireIdempotencyKeys,
} from "../../src/retention/partitions.js";
import {
  applyAppRoles,
  DB_APPS,
  type DbApp,
  FUNCTION_ACCESS,
  SEQUENCE_ACCESS,
  scramVerifier,
  TABLE_ACCESS,
  type TablePrivilege,
} from "../../src/setup/roles.js";

// The apps' own roles (roles.ts): what applyAppRoles makes of them on a real server, and that
// a second run converges on TABLE_ACCESS whatever was granted by hand meanwhile.
const { url, database } = await freshDatabase(t);
const made = await freshAppRoles(t, url);
const { roles } = made;
const server = postgres(TEST_PG_URL, { max: 1, onnotice: () => {} });
t.teardown(() => server.end());

const ALL = ["SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"] as const;

/** What a role may do with each table of the database, as Postgres says. */
async function privilegesOf(name: string): Promise<Record<string, string[]>> {
  const rows = await database.sql<{ table: string; privileges: string[] }[]>`
    select t.tablename as table,
      array(select p from unnest(${ALL as unknown as string[]}::text[]) p
            where has_table_privilege(${name}, format('public.%I', t.tablename), p)) as privileges
    from (select tablename from pg_tables where schemaname = 'public'
          union all select viewname from pg_views where schemaname = 'public') t order by 1`;
  return Object.fromEntries(rows.filter((r) => r.privileges.length > 0).map((r) => [r.table, r.privileges]));
}

const expected = (app: DbApp): Record<string, string[]> =>
  Object.fromEntries(
    Object.entries(TABLE_ACCESS)
      .filter(([, access]) => (access[app]?.length ?? 0) > 0)
      .map(([table, access]) => [
        table,
        ALL.filter((p) => (access[app] as readonly TablePrivilege[]).includes(p.toLowerCase() as TablePrivilege)),
      ]),
  );

const as = (app: DbApp) => {
  const sql = postgres(made.urls[app], { max: 1, onnotice: () => {} });
  t.teardown(() => sql.end());
  return sql;
};

t.test("every table of the schema has a decision, and every decision a table", async (t) => {
  t.same(made.undecided, [], "a table the migrations add is listed in TABLE_ACCESS (libs/db/src/setup/roles.ts)");
  t.same(made.absent, [], "a table TABLE_ACCESS lists is in the schema");
});

t.test("each role logs in and holds nothing beyond LOGIN", async (t) => {
  for (const app of DB_APPS) {
    const [role] = await server<Record<string, boolean>[]>`
      select rolcanlogin, rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls
      from pg_roles where rolname = ${roles[app].name}`;
    t.same(
      role,
      {
        rolcanlogin: true,
        rolsuper: false,
        rolcreatedb: false,
        rolcreaterole: false,
        rolreplication: false,
        rolbypassrls: false,
      },
      app,
    );
    const [memberships] = await server<{ n: number }[]>`
      select count(*)::int as n from pg_auth_members m join pg_roles r on r.oid = m.member
      where r.rolname = ${roles[app].name}`;
    t.equal(memberships?.n, 0, `${app} is a member of no role`);
  }
});

t.test("each role holds exactly its tables' privileges: its sequences only, no schema of its own", async (t) => {
  for (const app of DB_APPS) {
    const { name } = roles[app];
    t.same(await privilegesOf(name), expected(app), `${app}'s tables`);
    const [other] = await database.sql<{ sequences: string[]; create: boolean; drizzle: boolean }[]>`
      select array(select s.sequencename::text from pg_sequences s
              where has_sequence_privilege(${name}, format('%I.%I', s.schemaname, s.sequencename), 'USAGE,SELECT,UPDATE')
              order by 1) as sequences,
        has_schema_privilege(${name}, 'public', 'CREATE') as create,
        has_schema_privilege(${name}, 'drizzle', 'USAGE') as drizzle`;
    const sequences = Object.entries(SEQUENCE_ACCESS)
      .filter(([, apps]) => apps.includes(app))
      .map(([sequence]) => sequence)
      .sort();
    t.same(
      other,
      { sequences, create: false, drizzle: false },
      `${app}: its sequences, no CREATE, no migrations table`,
    );
    const functions = await database.sql<{ fn: string }[]>`
      select p.oid::regprocedure::text as fn from pg_proc p
      where p.proname like 'notify\\_%' and p.prosecdef and has_function_privilege(${name}, p.oid, 'EXECUTE')
      order by 1`;
    t.same(
      functions.map((f) => f.fn.replace(/timestamp with time zone/g, "timestamptz")),
      Object.entries(FUNCTION_ACCESS)
        .filter(([, apps]) => apps.includes(app))
        .map(([fn]) => fn.replace(/, /g, ","))
        .sort(),
      `${app}: the upkeep functions its FUNCTION_ACCESS names, no other`,
    );
  }
});

t.test("refused outside its grants: the server says so; the status history draws its ids", async (t) => {
  const id = `roles-${randomBytes(4).toString("hex")}`;
  await seedNotification(database, { id, clientId: "c", userId: "u" });
  const workers = as("workers");
  await workers`insert into channel_status_events (notification_id, channel, status, attempt) values (${id}, 'email', 'pending', 0)`;
  t.pass("workers insert a status event (its id from the granted sequence)");
  await t.rejects(workers`select id from api_keys limit 1`, { code: "42501" }, "workers read no API key");
  await t.rejects(workers`delete from notifications where id = ${id}`, { code: "42501" }, "nor delete a notification");
  const receipts = as("receipts");
  await t.rejects(receipts`truncate provider_receipts`, { code: "42501" }, "receipts truncate nothing");
  await t.rejects(receipts`create table mine (id int)`, { code: "42501" }, "nor create a table");
  const ingest = as("ingest");
  await t.rejects(ingest`select * from deferred_notifications`, { code: "42501" }, "ingest reads no timer");
  await t.rejects(ingest`select * from drizzle.__drizzle_migrations`, { code: "42501" }, "nor the migrations");
  const processor = as("processor");
  await t.rejects(processor`select key_hash from api_keys`, { code: "42501" }, "the processor reads no key");
  await t.rejects(
    workers`select notify_log_drop('_p20000101')`,
    { code: "42501" },
    "only the processor may call the log's upkeep",
  );
  await t.rejects(
    processor`select * from notify_log_archive_lines('_p20000101', '', 1)`,
    /no detached log partition/,
    "the processor may (and is told there is nothing to read)",
  );
});

t.test("the processor's role keeps the log's partitions: makes, detaches, archives and drops", async (t) => {
  const processor = as("processor");
  const db = { sql: processor } as unknown as Parameters<typeof extendLog>[0];
  const before = await logPartitions(db);
  t.ok(
    (await extendLog(db, { aheadMs: (before.length + 3) * 86_400_000, widthHours: 24 })) > 0,
    "makes partitions ahead",
  );
  const last = (await logPartitions(db)).at(-1);
  if (!last) throw new Error("no partition");
  t.equal(await detachPartition(db, last.suffix), 0, "detaches one (nothing in it to keep)");
  t.same(await detachedPartitions(db), [last.suffix]);
  t.same(await detachedLines(db, last.suffix, "", 10), [], "reads it for the archive");
  await dropDetached(db, last.suffix);
  t.same(await detachedPartitions(db), [], "and drops it");
  const workers = as("workers");
  await t.rejects(
    workers`select * from notify_log_partitions`,
    { code: "42501" },
    "another app reads no partition list",
  );
});

t.test(
  "the processor's role keeps the idempotency guard's partitions; ingest purges its default partition",
  async (t) => {
    const processor = as("processor");
    const db = { sql: processor } as unknown as Parameters<typeof extendIdempotencyKeys>[0];
    t.ok((await extendIdempotencyKeys(db, { windowHours: 24, marginDays: 10 })) > 0, "makes partitions ahead");
    t.equal(await retireIdempotencyKeys(db, 24), 0, "retires (none is past)");
    const ingest = { sql: as("ingest") } as unknown as Parameters<typeof purgeExpiredIdempotencyKeys>[0];
    t.equal(await purgeExpiredIdempotencyKeys(ingest, 24), 0, "ingest purges the default partition");
    await t.rejects(
      as("workers")`select notify_idempotency_retire(interval '1 day')`,
      { code: "42501" },
      "another app may not drop them",
    );
    await t.rejects(
      as("ingest")`select notify_idempotency_extend(now())`,
      { code: "42501" },
      "nor may ingest make them",
    );
  },
);

t.test("a second run converges: a grant made by hand goes, a new password takes", async (t) => {
  const { name } = roles.workers;
  await database.sql.unsafe(`grant select, delete on api_keys to "${name}"`);
  await database.sql.unsafe(`grant usage on sequence inbox_token_revocations_id_seq to "${name}"`);
  const [before] = await server<
    { verifier: string }[]
  >`select rolpassword as verifier from pg_authid where rolname = ${name}`;
  const changed = { ...roles, workers: { name, password: randomBytes(24).toString("hex") } };
  await applyAppRoles(url, changed);
  await applyAppRoles(url, changed);
  t.same(await privilegesOf(name), expected("workers"), "exactly TABLE_ACCESS again");
  const [sequence] = await database.sql<{ granted: boolean }[]>`
    select has_sequence_privilege(${name}, 'inbox_token_revocations_id_seq', 'USAGE') as granted`;
  t.equal(sequence?.granted, false, "the sequence grant went too");
  const [after] = await server<
    { verifier: string }[]
  >`select rolpassword as verifier from pg_authid where rolname = ${name}`;
  t.not(after?.verifier, before?.verifier, "the new password's verifier is stored");
  t.ok(verifies(after?.verifier ?? "", changed.workers.password), "for the new password");
  t.notOk(verifies(after?.verifier ?? "", roles.workers.password), "not the old one");
  for (const app of DB_APPS) t.same(await privilegesOf(roles[app].name), expected(app), `${app} unchanged`);
});

/** Whether a stored verifier is `password`'s: the same salt and iterations give the same keys. */
function verifies(stored: string, password: string): boolean {
  const [, iterations, salt] = /^SCRAM-SHA-256\$(\d+):([^$]+)\$/.exec(stored) ?? [];
  if (iterations === undefined || salt === undefined) return false;
  return scramVerifier(password, Buffer.from(salt, "base64"), Number(iterations)) === stored;
}

t.test("the verifier given to Postgres is the one Postgres makes of the password itself", async (t) => {
  const name = `notify_t${randomBytes(5).toString("hex")}_scram`;
  const password = randomBytes(24).toString("hex");
  t.teardown(() => server.unsafe(`drop role if exists "${name}"`));
  await server.unsafe(`set password_encryption = 'scram-sha-256'`);
  await server.unsafe(`create role "${name}" password '${password}'`);
  const [own] = await server<
    { verifier: string }[]
  >`select rolpassword as verifier from pg_authid where rolname = ${name}`;
  t.match(own?.verifier, /^SCRAM-SHA-256\$4096:/);
  t.ok(verifies(own?.verifier ?? "", password), "Postgres's salt and iterations, our keys: the same verifier");
  t.notOk(verifies(own?.verifier ?? "", `${password}x`));
});

t.test("refused: a superuser's name, the job's own role, a shared role, a weak or unsafe password", async (t) => {
  const good = (app: DbApp) => ({ name: `notify_never_${app}`, password: randomBytes(24).toString("hex") });
  const with_ = (app: DbApp, role: { name: string; password: string }) => ({
    ingest: good("ingest"),
    processor: good("processor"),
    workers: good("workers"),
    receipts: good("receipts"),
    [app]: role,
  });
  await t.rejects(
    applyAppRoles(url, with_("ingest", { ...good("ingest"), name: "postgres" })),
    /superuser|running this job/,
  );
  await t.rejects(applyAppRoles(url, with_("workers", { ...good("workers"), name: "notify_never_ingest" })), /its own/);
  await t.rejects(applyAppRoles(url, with_("receipts", { ...good("receipts"), password: "short" })), /16 or more/);
  await t.rejects(
    applyAppRoles(url, with_("receipts", { ...good("receipts"), password: "p@ss/word:with-specials" })),
    /16 or more/,
  );
  await t.rejects(
    applyAppRoles(url, with_("processor", { ...good("processor"), name: 'x"; drop table' })),
    /identifier/,
  );
  const [none] = await server<
    { n: number }[]
  >`select count(*)::int as n from pg_roles where rolname like 'notify_never_%'`;
  t.equal(none?.n, 0, "nothing was created by a refused run");
});
