import {
  type ApiKeyRecord,
  createKey,
  type Database,
  type IssuedApiKey,
  listKeys,
  type RotatedApiKey,
  revokeKey,
  rotateKey,
} from "@notify/db";

/** Keys fetched per query when listing every matching key. */
const LIST_BATCH = 200;

/** Issues a key; the plaintext is in the answer and nowhere else. */
export const issueKey = (database: Database, input: Parameters<typeof createKey>[1]): Promise<IssuedApiKey> =>
  createKey(database, input);

/** Every key matching, newest first, fetched a page at a time. */
export async function listAllKeys(
  database: Database,
  options: { clientId?: string; includeRevoked?: boolean },
): Promise<ApiKeyRecord[]> {
  const keys: ApiKeyRecord[] = [];
  for (let page = 1; ; page++) {
    const { data, total_count } = await listKeys(database, { ...options, page, pageSize: LIST_BATCH });
    keys.push(...data);
    if (data.length < LIST_BATCH || keys.length >= total_count) return keys;
  }
}

/** Issues a like key; the old one keeps working for `graceSeconds`. Fails for an unknown id. */
export async function rotateKeyById(database: Database, id: string, graceSeconds: number): Promise<RotatedApiKey> {
  const rotated = await rotateKey(database, id, { graceSeconds });
  if (!rotated) throw new Error(`no active API key with id ${id} (unknown, or already revoked)`);
  return rotated;
}

/** Revokes a key now, and every key minted from it (`cascaded`). Fails for an unknown id. */
export async function revokeKeyById(database: Database, id: string): Promise<ApiKeyRecord & { cascaded: string[] }> {
  const revoked = await revokeKey(database, id);
  if (!revoked) throw new Error(`no API key with id ${id}`);
  return revoked;
}
