import { generateKey, hashKey, keyDisplayPrefix, newId, type Scope } from "@notify/core";
import type { Database, Sql } from "./index.js";
import type { RowPick } from "./rows.js";
import type { apiKeys } from "./schema/index.js";

/**
 * Issuing, listing, rotating and revoking API keys: the verbs shared by the admin API and the
 * `notify keys` CLI, so both answer with the same shape (snake_case, RFC 3339 UTC timestamps).
 * Only the SHA-256 of a key is stored; the plaintext exists in the answer to create and rotate.
 */

/** `grace`: replaced by a rotation, the key still authenticates until `revoked_at`. */
export type ApiKeyStatus = "active" | "grace" | "revoked";

export interface ApiKeyRecord {
  id: string;
  client_id: string;
  name: string;
  /** The key's first characters, enough to tell keys apart in a listing. */
  prefix: string;
  scopes: Scope[];
  /** Inbound leaky bucket of the key; null when the service defaults apply. */
  rate_limit: { burst: number; per_second: number } | null;
  status: ApiKeyStatus;
  created_at: string;
  revoked_at: string | null;
  last_used_at: string | null;
}

/** A record with its plaintext key: returned once, never stored. */
export interface IssuedApiKey extends ApiKeyRecord {
  key: string;
}

export interface RotatedApiKey extends IssuedApiKey {
  /** The replaced key; its `revoked_at` is when it stops working. */
  previous: ApiKeyRecord;
}

export interface CreateKeyInput {
  clientId: string;
  name: string;
  scopes: Scope[];
  rateLimit?: { burst: number; perSecond: number };
}

export interface ListKeysOptions {
  clientId?: string;
  /** Also list keys whose revocation has taken effect (keys in a grace period are always listed). */
  includeRevoked?: boolean;
  /** From 1. */
  page: number;
  pageSize: number;
}

interface Row {
  id: string;
  client_id: string;
  name: string;
  prefix: string;
  scopes: Scope[];
  rate_limit_burst: number | null;
  rate_limit_per_second: number | null;
  status: ApiKeyStatus;
  created_at: Date;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

// Status is computed with the database clock, the same clock the authentication lookup uses.
const columns = (sql: Sql) => sql`
  id, client_id, name, prefix, scopes, rate_limit_burst, rate_limit_per_second, created_at, revoked_at, last_used_at,
  case when revoked_at is null then 'active' when revoked_at > now() then 'grace' else 'revoked' end as status`;

const toRecord = (row: Row): ApiKeyRecord => ({
  id: row.id,
  client_id: row.client_id,
  name: row.name,
  prefix: row.prefix,
  scopes: row.scopes,
  rate_limit:
    row.rate_limit_burst === null || row.rate_limit_per_second === null
      ? null
      : { burst: row.rate_limit_burst, per_second: row.rate_limit_per_second },
  status: row.status,
  created_at: row.created_at.toISOString(),
  revoked_at: row.revoked_at?.toISOString() ?? null,
  last_used_at: row.last_used_at?.toISOString() ?? null,
});

const one = (rows: Row[]): ApiKeyRecord | null => (rows[0] ? toRecord(rows[0]) : null);

export async function createKey(database: Database, input: CreateKeyInput): Promise<IssuedApiKey> {
  const key = generateKey();
  const rows = await database.sql<Row[]>`
    insert into api_keys (id, client_id, name, prefix, key_hash, scopes, rate_limit_burst, rate_limit_per_second)
    values (${newId()}, ${input.clientId}, ${input.name}, ${keyDisplayPrefix(key)}, ${hashKey(key)}, ${input.scopes},
            ${input.rateLimit?.burst ?? null}, ${input.rateLimit?.perSecond ?? null})
    returning ${columns(database.sql)}`;
  return { ...toRecord(rows[0] as Row), key };
}

export async function getKey(database: Database, id: string): Promise<ApiKeyRecord | null> {
  return one(await database.sql<Row[]>`select ${columns(database.sql)} from api_keys where id = ${id}`);
}

/** Newest first. Offset pagination: an admin list is small and wants random page access. */
export async function listKeys(
  database: Database,
  query: ListKeysOptions,
): Promise<{ data: ApiKeyRecord[]; total_count: number }> {
  const { sql } = database;
  const where = sql`where true
    ${query.clientId === undefined ? sql`` : sql`and client_id = ${query.clientId}`}
    ${query.includeRevoked ? sql`` : sql`and (revoked_at is null or revoked_at > now())`}`;
  const [rows, counts] = await Promise.all([
    sql<Row[]>`select ${columns(sql)} from api_keys ${where}
      order by created_at desc, id desc limit ${query.pageSize} offset ${(query.page - 1) * query.pageSize}`,
    sql<{ n: number }[]>`select count(*)::int as n from api_keys ${where}`,
  ]);
  return { data: rows.map(toRecord), total_count: counts[0]?.n ?? 0 };
}

/**
 * Issues a replacement with the same client, name, scopes and limits
 * and revokes the old key `graceSeconds` from now, so its callers can switch over. A
 * revocation already due earlier is kept: rotating never revives or extends a key.
 * Null when no key has this id.
 */
export async function rotateKey(
  database: Database,
  id: string,
  options: { graceSeconds: number },
): Promise<RotatedApiKey | null> {
  const key = generateKey();
  return database.sql.begin(async (tx) => {
    const previous = await tx<Row[]>`
      update api_keys set revoked_at = least(revoked_at, now() + make_interval(secs => ${options.graceSeconds}))
      where id = ${id} returning ${columns(database.sql)}`;
    const old = previous[0];
    if (!old) return null;
    const created = await tx<Row[]>`
      insert into api_keys (id, client_id, name, prefix, key_hash, scopes, rate_limit_burst, rate_limit_per_second)
      values (${newId()}, ${old.client_id}, ${old.name}, ${keyDisplayPrefix(key)}, ${hashKey(key)}, ${old.scopes},
              ${old.rate_limit_burst}, ${old.rate_limit_per_second})
      returning ${columns(database.sql)}`;
    return { ...toRecord(created[0] as Row), key, previous: toRecord(old) };
  });
}

/**
 * Revokes a key now, ending any grace period. Idempotent: an earlier revocation time is kept.
 * Null when no key has this id.
 */
export async function revokeKey(database: Database, id: string): Promise<ApiKeyRecord | null> {
  return one(
    await database.sql<Row[]>`
      update api_keys set revoked_at = case when revoked_at <= now() then revoked_at else now() end
      where id = ${id} returning ${columns(database.sql)}`,
  );
}

// Authentication: the lookup behind every API request.

/** An API key that authenticates now: never revoked, or in a rotation grace period. */
export type ActiveApiKey = Omit<
  RowPick<typeof apiKeys, "id" | "client_id" | "scopes" | "revoked_at" | "rate_limit_burst" | "rate_limit_per_second">,
  "scopes"
> & { scopes: Scope[] };

/** The key with this SHA-256, if it authenticates now (by the database clock); null otherwise. */
export async function findActiveKeyByHash(database: Database, keyHash: string): Promise<ActiveApiKey | null> {
  const [row] = await database.sql<ActiveApiKey[]>`
    select id, client_id, scopes, revoked_at, rate_limit_burst, rate_limit_per_second from api_keys
    where key_hash = ${keyHash} and (revoked_at is null or revoked_at > now())`;
  return row ?? null;
}

/** Records that the key was used now (last_used_at tells operators which keys are unused). */
export async function touchKeyLastUsed(database: Database, keyId: string): Promise<void> {
  await database.sql`update api_keys set last_used_at = now() where id = ${keyId}`;
}
