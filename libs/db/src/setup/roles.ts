import { createHash, createHmac, pbkdf2Sync, randomBytes } from "node:crypto";
import postgres from "postgres";

/**
 * Each app's own Postgres role, with the privileges its statements need and no more: compose's
 * migrate job creates them (as the superuser, which only it holds) and the apps connect as them.
 * Privileges are listed per table, by hand, from the functions each app calls (TABLE_ACCESS), and
 * every run of the job revokes what a role holds and grants the list again, so a line removed
 * here is a privilege gone after the next deploy.
 */
export const DB_APPS = ["ingest", "processor", "workers", "receipts"] as const;
export type DbApp = (typeof DB_APPS)[number];

export type TablePrivilege = "select" | "insert" | "update" | "delete";

/** The environment variable of an app's role password (compose takes it from .env). */
export const dbPasswordVariable = (app: DbApp) => `NOTIFY_${app.toUpperCase()}_DB_PASSWORD`;

/** The role an app connects as, unless its deployment names another. */
export const dbRoleName = (app: DbApp) => `notify_${app}`;

const S = "select";
const I = "insert";
const U = "update";
const D = "delete";

/**
 * What each app's statements do with each table. SELECT comes with every UPDATE and DELETE:
 * their WHERE clauses and RETURNING read the table. UPDATE also stands for row locks (`for
 * update`, which Postgres grants with UPDATE only). INSERT ... ON CONFLICT DO UPDATE needs
 * INSERT, UPDATE and SELECT. Identity columns draw from their sequences without a grant; the
 * few plain sequences are in SEQUENCE_ACCESS. No app needs TRUNCATE or anything on the drizzle
 * schema. A partitioned table is granted as one table: statements name it, not its partitions. Foreign-key checks and cascades run as
 * the table's owner, and LISTEN, NOTIFY and advisory locks need no privilege.
 *
 * A table not listed here is granted to no app: a migration that adds one decides here who may
 * use it (a test fails until it does), and the job's next run grants it.
 */
export const TABLE_ACCESS: Readonly<Record<string, Readonly<Partial<Record<DbApp, readonly TablePrivilege[]>>>>> = {
  // ingest: authentication (lookup, last used) and the keys API (create, rotate, revoke).
  api_keys: { ingest: [S, I, U] },
  // ingest: imports and single members (the count trigger updates audiences as the caller);
  // processor: a broadcast's next batch of members.
  audience_members: { ingest: [S, I, D], processor: [S] },
  audiences: { ingest: [S, I, U] },
  // ingest: a broadcast's count, kept and read again.
  broadcast_progress: { ingest: [S, I, U] },
  // ingest: counting a broadcast's recipients; processor: an expanded batch's recipients, and the
  // webhook dispatcher's tallies, retention's row path (the default and first partitions);
  // workers and receipts: the channel trigger's look for a tally.
  broadcast_recipients: { ingest: [S], processor: [S, I, D], workers: [S], receipts: [S] },
  // ingest: accept, read, pause, resume, cancel; processor: expand (row lock, cursor, finish).
  broadcasts: { ingest: [S, I, U], processor: [S, U] },
  // ingest: timelines and dead letters' histories; processor: routing, releases, replays,
  // fallbacks, the inbox sweep, archiving; workers and receipts: every status they move.
  channel_status_events: { ingest: [S], processor: [S, I, D], workers: [I], receipts: [I] },
  // ingest: an address change recorded with the key that made it, and the operator's list.
  contact_changes: { ingest: [S, I] },
  // processor: quiet hours' timers (routing, release, a fallback's step).
  deferred_notifications: { processor: [S, I, U, D] },
  // ingest: timelines; processor: archiving; workers: each attempt, and a dead letter's history.
  delivery_attempts: { ingest: [S], processor: [S, D], workers: [S, I] },
  // ingest: the secrets its API keys' and unsubscribe links' MACs are made with; workers: the
  // unsubscribe links' (each created by the first process that needs it).
  deployment_secrets: { ingest: [S, I], workers: [S, I] },
  // processor: joins, sends and archives digests; ingest: an item's digest for its status.
  digest_items: { ingest: [S], processor: [S, I, D] },
  digests: { ingest: [S], processor: [S, I, U, D] },
  // ingest: the accept's claim, replays of a key, the purge, an unpublished batch released.
  idempotency_keys: { ingest: [S, I, U, D] },
  // ingest: claims and reads consult the records from before the guard was partitioned, and a
  // failed publish releases its key there too.
  idempotency_keys_legacy: { ingest: [S, D] },
  // ingest: the inbox API (list, count, mark one or all); processor: in-app channels settled
  // from the inbox, retention's row path (the default and first partitions); workers: storing an
  // item (a repeat finds the first).
  inbox_items: { ingest: [S, U], processor: [S, D], workers: [S, I, U] },
  // ingest: each client's count of revocation rows, taken by a revocation that adds one (an
  // upsert), given back by the purge.
  inbox_token_revocation_counts: { ingest: [S, I, U] },
  // ingest: revoking signed inbox tokens (one, or a user's: an upsert moving it forward), reading
  // the revocations in force, purging those whose tokens have all expired.
  inbox_token_revocations: { ingest: [S, I, U, D] },
  // ingest: checking opaque inbox tokens (`ntu_` and random bytes, no signature: the API mints
  // signed ones, and an opaque token a user holds works until it expires), deleting a user's when
  // all are revoked, purging expired ones.
  inbox_tokens: { ingest: [S, D] },
  // ingest: reads (timelines, lists, dead letters); processor: routing, releases, fallbacks,
  // replays, sweeps; workers: the channel read and status moves; receipts: binding and moving.
  notification_channels: { ingest: [S], processor: [S, I, U, D], workers: [S, U], receipts: [S, U] },
  // ingest: the accept's fallback chain, reads, an unpublished batch removed; processor: taking
  // and ending steps, archiving.
  notification_fallbacks: { ingest: [S, I, D], processor: [S, U, D] },
  // ingest: the accept, reads, an unpublished batch removed; processor: routing reads,
  // broadcast batches, archiving (row lock, delete); workers and receipts: reads.
  notifications: { ingest: [S, I, D], processor: [S, I, U, D], workers: [S], receipts: [S] },
  // Views of the log's partitions (made ahead, detached): the processor's retention job reads them.
  notify_log_detached: { processor: [S] },
  notify_log_partitions: { processor: [S] },
  // processor: the promotional daily cap (take a slot, purge old days).
  promotional_daily_counts: { processor: [S, I, U, D] },
  // ingest: timelines; processor: fallbacks' delivery confirmations, retention's row path (the
  // default and first partitions); receipts: all of it.
  provider_receipts: { ingest: [S], processor: [S, D], receipts: [S, I, U, D] },
  // ingest: the accept's outbox row, settling, the recovery sweep; processor: broadcast
  // batches' rows (listed, settled), the unrouted sweep's and archive's checks.
  publish_outbox: { ingest: [S, I, U, D], processor: [S, I, U, D] },
  // ingest: the suppressions API (a client's own entries, read with those for every client; a
  // PUT's upsert rewrites an entry it finds unchanged, to return it);
  // processor and workers: whether an address is suppressed (routing, and again before a send);
  // receipts: entries from providers' events and inbound STOPs, removed by a START.
  suppressions: { ingest: [S, I, U, D], processor: [S], workers: [S], receipts: [S, I, D] },
  // processor: where its sweeps stand.
  sweep_positions: { processor: [S, I, U] },
  // ingest: the templates API and the accept's version pin; processor: rendering.
  template_variants: { ingest: [S, I], processor: [S] },
  template_versions: { ingest: [S, I], processor: [S] },
  templates: { ingest: [S, I, U], processor: [S] },
  // processor: per-user throttles taken when routing, purged once past the longest period.
  throttle_slots: { processor: [S, I, D] },
  // ingest: the contacts and preferences APIs, and the inbox's preference centre; processor:
  // routing's profile, a replay's address; workers: the address a webhook endpoint asking for it
  // (include: recipient) is given, and a push subscription the push service says is gone.
  user_contacts: { ingest: [S, I, U], processor: [S], workers: [S] },
  user_preferences: { ingest: [S, I, U], processor: [S], workers: [S, U] },
  // Outbound webhooks. The triggers that write events (drizzle/0019_webhooks.sql) run as the
  // caller: every app whose statements change a channel, a notification, a fallback, an inbox
  // item or a broadcast reads the endpoints and writes events, deliveries and completion checks.
  // ingest: the endpoints API, replays and pings, figures; processor: the dispatcher (completion
  // checks, due deliveries), retention's purge; workers: the senders' claims and outcomes.
  webhook_attempts: { ingest: [S], processor: [S, D], workers: [S, I] },
  // ingest: a broadcast accepted (tallied) or cancelled (looked at again); processor: its
  // expansion finishing, the dispatcher's counts, retention; workers and receipts: the channel
  // trigger's look for a tally.
  webhook_broadcast_tallies: { ingest: [S, I, U], processor: [S, I, U, D], workers: [S], receipts: [S] },
  // A channel's outcome asks for its notification's check by an insert that updates the one
  // already waiting (ON CONFLICT DO UPDATE: select and update rights), holding it until commit.
  webhook_completion_checks: { processor: [S, I, U, D], workers: [S, I, U], receipts: [S, I, U] },
  webhook_deliveries: { ingest: [S, I, U], processor: [S, I, U, D], workers: [S, I, U], receipts: [I] },
  webhook_endpoints: { ingest: [S, I, U, D], processor: [S], workers: [S, U], receipts: [S] },
  webhook_events: { ingest: [S, I], processor: [S, I, D], workers: [S, I], receipts: [I] },
};

export interface AppRole {
  /** A plain lower-case identifier (a-z, 0-9, _), not a role Postgres reserves. */
  name: string;
  password: string;
}

export interface AppliedRoles {
  /** Tables of the database TABLE_ACCESS does not list: granted to no app. */
  undecided: string[];
  /** Tables TABLE_ACCESS lists that the database does not have: skipped. */
  absent: string[];
}

const ROLE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;
/** Unreserved URL characters only, so a password goes into DATABASE_URL as it is. */
const PASSWORD = /^[A-Za-z0-9._~-]{16,}$/;

/** Why these roles cannot be applied, or undefined when they can. */
export function appRolesProblem(roles: Readonly<Record<DbApp, AppRole>>): string | undefined {
  const names = DB_APPS.map((app) => roles[app].name);
  for (const app of DB_APPS) {
    const { name, password } = roles[app];
    if (!ROLE_NAME.test(name) || name.startsWith("pg_"))
      return `${app}'s role name ${JSON.stringify(name)} is not a plain identifier`;
    if (!PASSWORD.test(password)) {
      return `${app}'s password must be 16 or more of A-Z a-z 0-9 . _ ~ - (e.g. openssl rand -hex 24)`;
    }
  }
  if (new Set(names).size !== names.length) return "each app needs a role of its own";
  return undefined;
}

/**
 * The SCRAM-SHA-256 verifier Postgres stores for `password` (RFC 5802, 7677; Postgres's
 * `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`): the role is given this, so the
 * password itself never reaches the server, its logs or its statistics. The password is ASCII
 * (appRolesProblem), which SASLprep leaves as it is.
 */
export function scramVerifier(password: string, salt = randomBytes(16), iterations = 4096): string {
  const salted = pbkdf2Sync(password, salt, iterations, 32, "sha256");
  const hmac = (text: string) => createHmac("sha256", salted).update(text).digest();
  const storedKey = createHash("sha256").update(hmac("Client Key")).digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString("base64")}$${storedKey.toString("base64")}:${hmac("Server Key").toString("base64")}`;
}

/** An identifier quoted for a statement (a database's name may hold any character). */
const quoted = (identifier: string) => `"${identifier.replaceAll('"', '""')}"`;

/** The privileges' names in SQL. */
/**
 * The plain sequences an app draws from with its inserts (nextval in a column default needs USAGE):
 * the status history's and the inbox items' ids, sequences because a partitioned table has no
 * identity column.
 */
export const SEQUENCE_ACCESS: Readonly<Record<string, readonly DbApp[]>> = {
  channel_status_events_id_seq: ["processor", "workers", "receipts"],
  // workers: storing an inbox item.
  inbox_items_id_seq: ["workers"],
};

/**
 * The functions only one app may call (their migration revokes them from PUBLIC): the log's and
 * the idempotency guard's partition upkeep, which runs as the tables' owner and belongs to the
 * processor's leader, and the purge of the guard's default partition, ingest's.
 */
export const FUNCTION_ACCESS: Readonly<Record<string, readonly DbApp[]>> = {
  "notify_log_extend(timestamptz, interval, timestamptz)": ["processor"],
  "notify_log_detach(text)": ["processor"],
  "notify_log_archive_lines(text, text, integer)": ["processor"],
  "notify_log_drop(text)": ["processor"],
  "notify_idempotency_extend(timestamptz)": ["processor"],
  "notify_idempotency_retire(interval)": ["processor"],
  "notify_idempotency_purge(interval, integer)": ["ingest"],
};

const SQL_PRIVILEGE: Record<TablePrivilege, string> = {
  select: "SELECT",
  insert: "INSERT",
  update: "UPDATE",
  delete: "DELETE",
};

/**
 * Creates or updates each app's role on the database at `url` (connected as the superuser) and
 * makes its privileges exactly TABLE_ACCESS's, in one
 * transaction: the apps never see a role half granted. Idempotent; a changed password replaces
 * the old one. A role gets LOGIN and none of SUPERUSER, CREATEDB, CREATEROLE, REPLICATION,
 * BYPASSRLS; a name that is an existing superuser, or the connected role, is refused rather than
 * stripped. Roles are the server's, not the database's: one set per server.
 */
export async function applyAppRoles(url: string, roles: Readonly<Record<DbApp, AppRole>>): Promise<AppliedRoles> {
  const problem = appRolesProblem(roles);
  if (problem !== undefined) throw new Error(problem);
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    return await sql.begin(async (tx) => {
      // One job at a time: two would interleave their revokes and grants.
      await tx`select pg_advisory_xact_lock(7266003)`;
      const [self] = await tx<{ user: string; database: string }[]>`
        select current_user as user, current_database() as database`;
      const tables = new Set(
        (
          await tx<{ name: string }[]>`
            select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
            where n.nspname = 'public' and c.relkind in ('r', 'p', 'v') and not c.relispartition`
        ).map((row) => row.name),
      );
      for (const app of DB_APPS) {
        const { name, password } = roles[app];
        const [existing] = await tx<
          { super: boolean }[]
        >`select rolsuper as super from pg_roles where rolname = ${name}`;
        if (name === self?.user) throw new Error(`${app}'s role ${name} is the role running this job`);
        if (existing?.super) throw new Error(`${app}'s role ${name} is a superuser: give the app a role of its own`);
        // The verifier holds only base64 characters, $ and :, so it needs no escaping.
        const attributes = `login nosuperuser nocreatedb nocreaterole noreplication nobypassrls password '${scramVerifier(password)}'`;
        await tx.unsafe(`${existing ? "alter" : "create"} role "${name}" with ${attributes}`);
        await tx.unsafe(`revoke all on all tables in schema public from "${name}"`);
        await tx.unsafe(`revoke all on all sequences in schema public from "${name}"`);
        // Public has both by default; granted too, for a database that revoked them from public.
        await tx.unsafe(`grant connect on database ${quoted(self?.database ?? "")} to "${name}"`);
        await tx.unsafe(`grant usage on schema public to "${name}"`);
        for (const [table, access] of Object.entries(TABLE_ACCESS)) {
          const privileges = access[app];
          if (privileges === undefined || privileges.length === 0 || !tables.has(table)) continue;
          await tx.unsafe(`grant ${privileges.map((p) => SQL_PRIVILEGE[p]).join(", ")} on "${table}" to "${name}"`);
        }
        for (const [sequence, apps] of Object.entries(SEQUENCE_ACCESS)) {
          if (apps.includes(app)) await tx.unsafe(`grant usage on sequence "${sequence}" to "${name}"`);
        }
        await tx.unsafe(`revoke all on all functions in schema public from "${name}"`);
        for (const [fn, apps] of Object.entries(FUNCTION_ACCESS)) {
          if (apps.includes(app)) await tx.unsafe(`grant execute on function ${fn} to "${name}"`);
        }
      }
      return {
        undecided: [...tables].filter((table) => !(table in TABLE_ACCESS)).sort(),
        absent: Object.keys(TABLE_ACCESS).filter((table) => !tables.has(table)),
      };
    });
  } finally {
    await sql.end({ timeout: 5 });
  }
}
