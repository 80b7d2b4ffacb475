import { generateSignedKey, hashKey, keyDisplayPrefix, newId, type Scope } from "@notify/core";
import type { Database, Sql } from "../pool.js";
import { loadCredentialKeys } from "./deployment-secrets.js";

/**
 * Issuing, listing, rotating and revoking API keys: the verbs shared by the admin API and the
 * `notify keys` CLI, so both answer with the same shape (snake_case, RFC 3339 UTC timestamps).
 * Only the SHA-256 of a key is stored; the plaintext exists in the answer to create and rotate.
 * Every key minted carries a MAC under the deployment's secret (libs/core credentials.ts).
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
  /** The key that minted this one through the API; null when the CLI or the setup did. */
  minted_by: string | null;
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
  /** The key minting it through the API: revoking that key revokes this one too. */
  mintedBy?: string;
}

export interface ListKeysOptions {
  /** Only this client's keys. */
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
  minted_by: string | null;
}

// Status is computed with the database clock, the same clock the authentication lookup uses.
const columns = (sql: Sql) => sql`
  id, client_id, name, prefix, scopes, rate_limit_burst, rate_limit_per_second, created_at, revoked_at, last_used_at, minted_by,
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
  minted_by: row.minted_by,
});

const one = (rows: Row[]): ApiKeyRecord | null => (rows[0] ? toRecord(rows[0]) : null);

/**
 * A key asked to mint or rotate one while it is itself revoked or in a rotation's grace period:
 * such a key makes no keys, since nothing would revoke them when its grace ends.
 */
export class InactiveMinterError extends Error {
  constructor(readonly keyId: string) {
    super(`API key ${keyId} is revoked or in a rotation's grace period and makes no keys`);
    this.name = "InactiveMinterError";
  }
}

/**
 * Issues a key. With `mintedBy`, the insert waits for a revocation of the minter under way and
 * is refused (InactiveMinterError) unless the minter is active and not in a grace period, so no
 * key is minted from one being revoked.
 */
export async function createKey(database: Database, input: CreateKeyInput): Promise<IssuedApiKey> {
  const key = generateSignedKey(await loadCredentialKeys(database));
  const { sql } = database;
  const rows = await sql<Row[]>`
    insert into api_keys (id, client_id, name, prefix, key_hash, scopes, rate_limit_burst, rate_limit_per_second, minted_by)
    select ${newId()}, ${input.clientId}, ${input.name}, ${keyDisplayPrefix(key)}, ${hashKey(key)}, ${input.scopes},
           ${input.rateLimit?.burst ?? null}, ${input.rateLimit?.perSecond ?? null}, ${input.mintedBy ?? null}
    ${
      input.mintedBy === undefined
        ? sql``
        : sql`where exists (select 1 from api_keys where id = ${input.mintedBy} and revoked_at is null for share)`
    }
    returning ${columns(sql)}`;
  const row = rows[0];
  if (row === undefined) throw new InactiveMinterError(input.mintedBy as string);
  return { ...toRecord(row), key };
}

/** Which keys a caller may rotate or revoke: its client's (absent: any), holding no scope beyond `scopes`. */
export interface KeyManager {
  clientId?: string;
  /** The scopes the caller may hand out; a key holding any other is not its to change. */
  scopes?: readonly Scope[];
  /** The caller's own key: a rotation's replacement is minted by it, and a revocation spares it. */
  keyId?: string;
}

const managed = (sql: Sql, by: KeyManager) => sql`
  ${by.clientId === undefined ? sql`` : sql`and client_id = ${by.clientId}`}
  ${by.scopes === undefined ? sql`` : sql`and scopes <@ ${by.scopes as Scope[]}::text[]`}`;

/** The key with this id; with `clientId`, only if it is that client's (null otherwise). */
export async function getKey(database: Database, id: string, clientId?: string): Promise<ApiKeyRecord | null> {
  const { sql } = database;
  return one(
    await sql<Row[]>`select ${columns(sql)} from api_keys
      where id = ${id} ${clientId === undefined ? sql`` : sql`and client_id = ${clientId}`}`,
  );
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
 * Issues a replacement with the same client, name, scopes and limits, and revokes the old key
 * `graceSeconds` from now, so its callers can switch over. A revocation already due earlier is
 * kept: rotating never revives or extends a key, and a key already revoked is not rotated. The
 * replacement is minted by the key that asked (`by.keyId`; the CLI, asking as nobody, keeps
 * the old key's minter), so a key that rotates itself cannot escape the revocation of the old
 * one; the keys the old one minted are the replacement's from then on. `by` limits which keys
 * the caller may rotate. Null when no such key exists.
 */
export async function rotateKey(
  database: Database,
  id: string,
  options: { graceSeconds: number; by?: KeyManager },
): Promise<RotatedApiKey | null> {
  const key = generateSignedKey(await loadCredentialKeys(database));
  const { sql } = database;
  const by = options.by ?? {};
  return sql.begin(async (tx) => {
    if (by.keyId !== undefined) {
      const [asker] = await tx`select 1 from api_keys where id = ${by.keyId} and revoked_at is null for share`;
      if (asker === undefined) throw new InactiveMinterError(by.keyId);
    }
    const previous = await tx<Row[]>`
      update api_keys set revoked_at = least(revoked_at, now() + make_interval(secs => ${options.graceSeconds}))
      where id = ${id} and (revoked_at is null or revoked_at > now()) ${managed(sql, by)}
      returning ${columns(sql)}`;
    const old = previous[0];
    if (!old) return null;
    const created = await tx<Row[]>`
      insert into api_keys (id, client_id, name, prefix, key_hash, scopes, rate_limit_burst, rate_limit_per_second, minted_by)
      values (${newId()}, ${old.client_id}, ${old.name}, ${keyDisplayPrefix(key)}, ${hashKey(key)}, ${old.scopes},
              ${old.rate_limit_burst}, ${old.rate_limit_per_second}, ${by.keyId ?? old.minted_by})
      returning ${columns(sql)}`;
    const replacement = created[0] as Row;
    // The asker stays where it is, even when the old key minted it: the lineage has no cycles.
    await tx`update api_keys set minted_by = ${replacement.id}
      where minted_by = ${old.id} and id <> ${replacement.id} ${by.keyId === undefined ? sql`` : sql`and id <> ${by.keyId}`}`;
    return { ...toRecord(replacement), key, previous: toRecord(old) };
  });
}

/**
 * Revokes a key now, ending any grace period, and with it every key minted from it, however
 * deep, except the caller's own key and what it minted (`by.keyId`: the holder of a key it
 * rotated into keeps its replacement when it ends the old one's grace). Idempotent: an earlier
 * revocation time is kept. `by` limits which keys the caller may revoke. The cascade runs until
 * it finds nothing more, so a key minted while it ran is revoked too. Null when no such key
 * exists; otherwise the key's record and the ids of the minted keys revoked with it.
 */
export async function revokeKey(
  database: Database,
  id: string,
  by: KeyManager = {},
): Promise<(ApiKeyRecord & { cascaded: string[] }) | null> {
  const { sql } = database;
  const spare = by.keyId === undefined ? sql`` : sql`and k.id <> ${by.keyId}`;
  const revokeOnce = () => sql<Row[]>`
    with recursive lineage(id) as (
      select id from api_keys where id = ${id} ${managed(sql, by)}
      union
      select k.id from api_keys k join lineage l on k.minted_by = l.id where true ${spare}
    )
    update api_keys set revoked_at = case when revoked_at <= now() then revoked_at else now() end
    where id in (select id from lineage) and (id = ${id} or revoked_at is null or revoked_at > now())
    returning ${columns(sql)}`;
  const rows = await revokeOnce();
  const root = rows.find((row) => row.id === id);
  if (root === undefined) return null;
  const cascaded = new Set(rows.filter((row) => row.id !== id).map((row) => row.id));
  // A key minted from the lineage while the statement ran is not in its snapshot: go again
  // until a pass revokes nothing new (minting waits for the minter's row, so this ends).
  for (let pass = 0; pass < 10; pass++) {
    const more = (await revokeOnce()).filter((row) => row.id !== id && !cascaded.has(row.id));
    if (more.length === 0) break;
    for (const row of more) cascaded.add(row.id);
  }
  return { ...toRecord(root), cascaded: [...cascaded] };
}
