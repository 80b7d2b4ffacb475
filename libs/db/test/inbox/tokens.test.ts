import { freshDatabase } from "@notify/testing";
import t from "tap";
import { findInboxTokenOwner, insertInboxToken, purgeExpiredInboxTokens } from "../../src/inbox/tokens.js";

// Opaque tokens open one user's items from one client while they and the key that minted them
// last.
const { database } = await freshDatabase(t);
const { sql } = database;

const owner = (userId: string, clientId = "c1") => ({ userId, clientId });
const key = async (id: string, client: string, revokedAt: Date | null = null) =>
  sql`insert into api_keys (id, client_id, name, prefix, key_hash, scopes, revoked_at)
    values (${id}, ${client}, ${id}, 'ntf_', ${`hash-${id}`}, ${["inbox"]}, ${revokedAt})`;

t.test("tokens open their owner while they and their key last", async (t) => {
  await key("k1", "c1");
  await key("k-grace", "c1", new Date(Date.now() + 60_000));
  await key("k-revoked", "c1", new Date(Date.now() - 1000));
  const token = (tokenHash: string, keyId: string, expiresInMs: number) =>
    insertInboxToken(database, {
      tokenHash,
      userId: "u1",
      clientId: "c1",
      keyId,
      expiresAt: new Date(Date.now() + expiresInMs),
    });
  await token("h-live", "k1", 60_000);
  await token("h-old", "k1", -1000);
  await token("h-grace", "k-grace", 60_000);
  await token("h-revoked", "k-revoked", 60_000);
  await token("h-no-key", "k-gone", 60_000);
  t.match(await findInboxTokenOwner(database, "h-live"), { ...owner("u1"), keyId: "k1", expiresAt: Date });
  t.equal(await findInboxTokenOwner(database, "h-old"), null, "expired");
  t.equal(await findInboxTokenOwner(database, "h-none"), null, "unknown");
  t.match(await findInboxTokenOwner(database, "h-grace"), owner("u1"), "its key in a rotation's grace still works");
  t.equal(await findInboxTokenOwner(database, "h-revoked"), null, "its key was revoked");
  t.equal(await findInboxTokenOwner(database, "h-no-key"), null, "its key is gone");
  await sql`insert into inbox_tokens (token_hash, user_id, client_id, expires_at) values ('h-legacy', 'u1', 'c1', now() + interval '1 hour')`;
  t.equal(await findInboxTokenOwner(database, "h-legacy"), null, "a token minted before keys were recorded");

  t.equal(await purgeExpiredInboxTokens(database), 1, "the expired one is purged");
  t.equal(Number((await sql`select count(*)::int as n from inbox_tokens`)[0]?.n), 5, "the others stay");
});
