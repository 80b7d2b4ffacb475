import { randomBytes } from "node:crypto";
import { onInboxTokensRevoked } from "@notify/bus";
import { hashKey, newId, signInboxToken } from "@notify/core";
import { insertInboxToken, loadCredentialKeys, purgeExpiredInboxTokenRevocations, seedApiKey } from "@notify/db";
import { createAttemptThrottle } from "@notify/http";
import { eventually } from "@notify/testing";
import t from "tap";
import { createInboxRevocations } from "../src/inbox/revocations.js";
import { countingDatabase, ingestApp, otherConnection } from "./support.js";

// Inbox tokens at the edge: a signed token is decided without a lookup, so no flood of bad ones
// from an address (behind NAT, someone else's) refuses a valid one; opaque tokens without a
// signature work until they expire, looked up against the address's budget; revocations
// take effect at once on every instance, and what they hold is bounded (ids no working token can
// have are not stored, a token's is kept until its latest expiry, a user's is one row, a client's
// are capped); each token and user has a rate limit.

const base = await ingestApp(t);
const { database, bus } = base;
const inboxKey = await seedApiKey(database, { clientId: "shop", name: "shop inbox", scopes: ["inbox"] });
const bankKey = await seedApiKey(database, { clientId: "bank", name: "bank inbox", scopes: ["inbox"] });
const keys = await loadCredentialKeys(database);

type App = Awaited<ReturnType<typeof ingestApp>>["app"];
const from = (address: string) => ({ incoming: { socket: { remoteAddress: address } } });

async function mint(app: App, userId: string, key = inboxKey) {
  const res = await app.request(`/api/v1/users/${userId}/inbox-tokens`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}` },
  });
  if (res.status !== 201) throw new Error(`mint: ${res.status} ${await res.text()}`);
  return (await res.json()) as { token: string; token_id: string };
}
const list = (app: App, token: string, address?: string) =>
  app.request("/api/v1/inbox", { headers: { "x-inbox-token": token } }, address ? from(address) : undefined);

/** The signed form with a MAC of random bytes: what a forger can make. */
const forged = () =>
  `ntu_${Buffer.from(JSON.stringify([1, newId(), "victim", "shop", "key_x", 0, 9_999_999_999])).toString("base64url")}.${randomBytes(32).toString("base64url")}`;
/** An opaque token, without a signature: only a lookup can tell. */
const opaque = () => `ntu_${randomBytes(32).toString("base64url")}`;

t.test("2,000 random and forged tokens from one address, then a valid one from it: 200", async (t) => {
  const { counter, database: inboxDatabase } = countingDatabase(database);
  const { app } = await ingestApp(t, {
    database,
    bus,
    inboxDatabase,
    preauthThrottle: createAttemptThrottle({ perSecond: 2, burst: 60 }),
  });
  const { token } = await mint(app, "nat-user");
  const address = "198.51.100.20";
  const answers = await Promise.all(
    Array.from({ length: 2000 }, (_, i) => list(app, i % 2 === 0 ? forged() : opaque(), address)),
  );
  const statuses = answers.map((a) => a.status);
  t.ok(
    statuses.every((s) => s === 401 || s === 429),
    "every bad token is refused",
  );
  t.ok(
    statuses.filter((s, i) => i % 2 === 0 && s === 401).length === 1000,
    "a forged token is a 401 at once, whatever the budget",
  );
  t.ok(statuses.includes(429), "opaque guesses past the address's budget: 429");
  t.ok(counter.queries <= 60, `${counter.queries} lookups for 1,000 opaque guesses: at most the burst`);

  const valid = await list(app, token, address);
  t.equal(valid.status, 200, "the valid token is served though the address's budget is spent");
});

t.test("an opaque token keeps working until it expires; its lookup is reserved first and given back", async (t) => {
  const { app } = await ingestApp(t, {
    database,
    bus,
    preauthThrottle: createAttemptThrottle({ perSecond: 0.01, burst: 2 }),
  });
  const keyId = (
    (await database.sql`select id from api_keys where key_hash = ${hashKey(inboxKey)}`)[0] as { id: string }
  ).id;
  const token = opaque();
  await insertInboxToken(database, {
    tokenHash: hashKey(token),
    userId: "old-user",
    clientId: "shop",
    keyId,
    expiresAt: new Date(Date.now() + 60_000),
  });
  for (let i = 0; i < 5; i++) t.equal((await list(app, token, "203.0.113.40")).status, 200, `valid opaque ${i + 1}`);
  const expired = opaque();
  await insertInboxToken(database, {
    tokenHash: hashKey(expired),
    userId: "old-user",
    clientId: "shop",
    keyId,
    expiresAt: new Date(Date.now() - 1000),
  });
  t.equal((await list(app, expired, "203.0.113.40")).status, 401, "an expired one: 401");
  t.equal((await list(app, opaque(), "203.0.113.40")).status, 401);
  t.equal((await list(app, opaque(), "203.0.113.40")).status, 429, "the budget is spent: 429 before a lookup");
  t.equal((await list(app, token, "203.0.113.40")).status, 429, "an opaque token waits like any other");
  t.equal((await list(app, (await mint(app, "old-user")).token, "203.0.113.40")).status, 200, "a signed one never");
  t.equal((await list(app, "ntu_short", "203.0.113.41")).status, 401, "a malformed one is refused without a lookup");
});

t.test("expired and foreign signed tokens are refused without a lookup", async (t) => {
  const now = Math.floor(Date.now() / 1000);
  const claims = {
    tokenId: newId(),
    userId: "u",
    clientId: "shop",
    keyId: "key_x",
    issuedAt: now - 100,
    expiresAt: now - 1,
  };
  const expired = await list(base.app, signInboxToken(keys, claims));
  t.equal(expired.status, 401);
  t.match(await expired.json(), { detail: /expired/ });
  const other = signInboxToken(
    { apiKey: randomBytes(32), inboxToken: randomBytes(32) },
    { ...claims, expiresAt: now + 600 },
  );
  t.match(await (await list(base.app, other)).json(), { status: 401, detail: /not one this service issued/ });
});

t.test("revocations take effect at once on every instance; the refresh bounds a missed one", async (t) => {
  // Two more instances as start.ts wires them: b hears announcements, c only refreshes.
  const busB = await otherConnection(t, bus);
  const revocationsB = createInboxRevocations(database, { refreshMs: 0 });
  onInboxTokensRevoked(busB, (event) =>
    revocationsB.add({
      clientId: event.client_id,
      userId: event.inbox_user_id,
      tokenId: event.token_id,
      revokedAt: new Date(event.revoked_at),
    }),
  );
  const revocationsC = createInboxRevocations(database, { refreshMs: 200 });
  t.teardown(() => {
    revocationsB.close();
    revocationsC.close();
  });
  const a = base.app;
  const b = (await ingestApp(t, { database, bus: busB, inboxRevocations: revocationsB })).app;
  const c = (await ingestApp(t, { database, bus, inboxRevocations: revocationsC })).app;
  const everywhere = async (token: string) =>
    Promise.all([a, b, c].map(async (app) => (await list(app, token)).status));

  const one = await mint(a, "ruth");
  const two = await mint(a, "ruth");
  const bank = await mint(a, "ruth", bankKey);
  t.same(await everywhere(one.token), [200, 200, 200]);

  const del = (path: string, key = inboxKey) =>
    a.request(`/api/v1/users/ruth/inbox-tokens${path}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${key}` },
    });
  t.equal((await del(`/${one.token_id}`, bankKey)).status, 204, "another client may name the id");
  t.same(await everywhere(one.token), [200, 200, 200], "but revokes only its own client's tokens");
  t.equal((await del(`/${one.token_id}`)).status, 204);
  t.equal((await list(a, one.token)).status, 401, "at once on the instance that revoked it");
  await eventually(async () => ((await list(b, one.token)).status === 401 ? true : undefined), 2000, "b hears it");
  await eventually(async () => ((await list(c, one.token)).status === 401 ? true : undefined), 3000, "c reads it");
  t.same(await everywhere(two.token), [200, 200, 200], "the user's other token works");

  t.equal((await del("")).status, 204);
  t.equal((await list(a, two.token)).status, 401, "every token of the user");
  await eventually(async () => ((await list(b, two.token)).status === 401 ? true : undefined), 2000, "b hears it");
  await eventually(async () => ((await list(c, two.token)).status === 401 ? true : undefined), 3000, "c reads it");
  t.same(await everywhere(bank.token), [200, 200, 200], "another client's token of the same user id works");
  const after = await mint(a, "ruth");
  t.same(await everywhere(after.token), [200, 200, 200], "a token minted afterwards works");

  t.equal((await del("/not-a-token-id")).status, 404);
  const read = await seedApiKey(database, { clientId: "shop", name: "reader", scopes: ["read"] });
  t.equal((await del("", read)).status, 403);
  t.equal((await a.request("/api/v1/users/ruth/inbox-tokens", { method: "DELETE" })).status, 401);
});

t.test("each token has a rate limit: 429 with Retry-After and the RateLimit headers", async (t) => {
  const { app } = await ingestApp(t, {
    database,
    bus,
    inbox: { tokenRate: { perSecond: 1, burst: 2 }, userRate: { perSecond: 1, burst: 3 } },
  });
  const first = await mint(app, "rita");
  const answers = await Promise.all(Array.from({ length: 5 }, () => list(app, first.token)));
  const statuses = answers.map((a) => a.status).sort();
  t.same(statuses, [200, 200, 429, 429, 429], "the token's queue of 2, then 429");
  const refused = answers.find((a) => a.status === 429) as Response;
  t.ok(Number(refused.headers.get("retry-after")) >= 1, "Retry-After");
  t.match(refused.headers.get("ratelimit-policy"), /q=2/);
  t.match(refused.headers.get("ratelimit"), /r=0/);
  t.match(await refused.json(), { code: "rate_limited", detail: /inbox token/ });
  const served = answers.find((a) => a.status === 200) as Response;
  t.match(served.headers.get("ratelimit-policy"), /q=\d/, "a served answer carries them too");

  t.equal((await list(app, (await mint(app, "other-user")).token)).status, 200, "another user is not limited");
});

t.test("a user's tokens share the user's bucket: more tokens do not raise the user's share", async (t) => {
  const { app } = await ingestApp(t, {
    database,
    bus,
    inbox: { tokenRate: { perSecond: 1, burst: 5 }, userRate: { perSecond: 1, burst: 3 } },
  });
  const tokens = [(await mint(app, "rosa")).token, (await mint(app, "rosa")).token];
  const answers = await Promise.all(tokens.flatMap((token) => [list(app, token), list(app, token)]));
  t.same(answers.map((a) => a.status).sort(), [200, 200, 200, 429], "each token's queue has room, the user's holds 3");
  const refused = answers.find((a) => a.status === 429) as Response;
  t.match(await refused.json(), { code: "rate_limited", detail: /inbox user/ });
  t.ok(Number(refused.headers.get("retry-after")) >= 1);
  t.match(refused.headers.get("ratelimit-policy"), /q=3/);
});

/** A UUIDv7 made at `ms`: the id of a token issued then. */
const idAt = (ms: number) => {
  const hex = `${Math.max(0, ms).toString(16).padStart(12, "0")}7${randomBytes(10).toString("hex").slice(0, 19)}`;
  const variant = ((Number.parseInt(hex[16] as string, 16) & 0x3) | 0x8).toString(16);
  const full = `${hex.slice(0, 16)}${variant}${hex.slice(17)}`;
  return `${full.slice(0, 8)}-${full.slice(8, 12)}-${full.slice(12, 16)}-${full.slice(16, 20)}-${full.slice(20, 32)}`;
};
const DAY_MS = 86_400_000;
const revocationRows = (clientId: string) =>
  database.sql<{ user_id: string; token_id: string | null; revoked_at: Date; expires_at: Date }[]>`
    select user_id, token_id, revoked_at, expires_at from inbox_token_revocations where client_id = ${clientId}
    order by id`;
const revokeAs = (app: App, key: string, userId: string, tokenId?: string) =>
  app.request(`/api/v1/users/${userId}/inbox-tokens${tokenId === undefined ? "" : `/${tokenId}`}`, {
    method: "DELETE",
    headers: { authorization: `Bearer ${key}` },
  });

t.test("an id no working token can have: the same 204, and nothing stored or held", async (t) => {
  const key = await seedApiKey(database, { clientId: "ids", name: "ids", scopes: ["inbox"] });
  const revocations = createInboxRevocations(database, { refreshMs: 0 });
  t.teardown(() => revocations.close());
  const { app } = await ingestApp(t, { database, bus, inboxRevocations: revocations });
  const now = Date.now();
  const impossible = {
    "a UUIDv4": "3b241101-e2bb-4255-8caf-4136c566a962",
    "a UUIDv7 issued longer ago than a token lives": idAt(now - DAY_MS - 2 * 60_000),
    "a UUIDv7 of the year 1970": "00000000-0000-7000-8000-000000000000",
    "a UUIDv7 issued in the future": idAt(now + 10 * 60_000),
    "the largest UUIDv7": "ffffffff-ffff-7fff-bfff-ffffffffffff",
  };
  for (const [what, id] of Object.entries(impossible)) {
    const res = await revokeAs(app, key, "ida", id);
    t.equal(res.status, 204, what);
    t.equal(await res.text(), "", "no body, like a revocation");
  }
  t.same(await revocationRows("ids"), [], "no row stored");
  t.equal(revocations.heldBy("ids"), 0, "nothing held in memory");

  const minted = await mint(app, "ida", key);
  t.equal((await revokeAs(app, key, "ida", minted.token_id)).status, 204);
  const recent = idAt(now - DAY_MS + 60_000);
  t.equal((await revokeAs(app, key, "ida", recent)).status, 204, "an id a token issued 23:59 ago has");
  t.same(
    (await revocationRows("ids")).map((r) => r.token_id),
    [minted.token_id, recent],
    "ids a working token can have are stored",
  );
  t.equal(revocations.heldBy("ids"), 2);
  t.equal((await list(app, minted.token)).status, 401, "and revoke it");
});

t.test("one token's revocation is kept until that token's latest expiry, not a day after it", async (t) => {
  const key = await seedApiKey(database, { clientId: "keep", name: "keep", scopes: ["inbox"] });
  const { app } = await ingestApp(t, { database, bus });
  const issuedMs = Date.now() - 20 * 3_600_000;
  const tokenId = idAt(issuedMs);
  t.equal((await revokeAs(app, key, "kay", tokenId)).status, 204);
  const [row] = await revocationRows("keep");
  t.equal(row?.expires_at.getTime(), issuedMs + DAY_MS, "its issue plus the longest lifetime");

  // In memory: held while the token may work, dropped once it cannot.
  let now = Date.now();
  const revocations = createInboxRevocations(database, { refreshMs: 20, now: () => now });
  t.teardown(() => revocations.close());
  await revocations.whenLoaded();
  const token = { clientId: "keep", userId: "kay", tokenId, issuedMs };
  t.ok(revocations.covers(token));
  t.equal(revocations.heldBy("keep"), 1);
  now = issuedMs + DAY_MS + 1;
  await eventually(async () => (revocations.heldBy("keep") === 0 ? true : undefined), 2000, "the entry to go");
  t.notOk(revocations.covers(token), "gone 4 h after its revocation, when the token has expired");
});

t.test("revoking all of a user's tokens again moves one row forward", async (t) => {
  const key = await seedApiKey(database, { clientId: "again", name: "again", scopes: ["inbox"] });
  const { app } = await ingestApp(t, { database, bus });
  t.equal((await revokeAs(app, key, "ava")).status, 204);
  const [first] = await revocationRows("again");
  await new Promise((resolve) => setTimeout(resolve, 5));
  const minted = await mint(app, "ava", key);
  t.equal((await list(app, minted.token)).status, 200, "a token minted afterwards works");
  for (let i = 0; i < 5; i++) t.equal((await revokeAs(app, key, "ava")).status, 204);
  const rows = await revocationRows("again");
  t.equal(rows.length, 1, "one row for the user, however often");
  t.ok((rows[0]?.revoked_at.getTime() ?? 0) > (first?.revoked_at.getTime() ?? 0), "revoked_at moved forward");
  t.equal((rows[0]?.expires_at.getTime() ?? 0) - (rows[0]?.revoked_at.getTime() ?? 0), DAY_MS);
  t.equal((await list(app, minted.token)).status, 401, "and covers the token minted in between");
});

t.test(
  "a client's revocations in force are capped: 429 with Retry-After, held here and counted in Postgres",
  async (t) => {
    const key = await seedApiKey(database, { clientId: "capped", name: "capped", scopes: ["inbox"] });
    const other = await seedApiKey(database, { clientId: "free", name: "free", scopes: ["inbox"] });
    // Instance b read the revocations before any of these and hears nothing: only Postgres tells it.
    const revocationsB = createInboxRevocations(database, { refreshMs: 0 });
    t.teardown(() => revocationsB.close());
    await revocationsB.whenLoaded();
    const a = (await ingestApp(t, { database, bus, inbox: { revocationsPerClient: 3 } })).app;
    const b = (
      await ingestApp(t, { database, bus, inbox: { revocationsPerClient: 3 }, inboxRevocations: revocationsB })
    ).app;
    const ids = [newId(), newId()];
    t.equal((await revokeAs(a, key, "cap-1", ids[0])).status, 204);
    t.equal((await revokeAs(a, key, "cap-1", ids[1])).status, 204);
    t.equal((await revokeAs(a, key, "cap-2")).status, 204, "a user's revocation counts too");
    const refused = await revokeAs(a, key, "cap-1", newId());
    t.equal(refused.status, 429, "a fourth one, beyond the cap of 3");
    t.equal(refused.headers.get("retry-after"), "60");
    t.match(await refused.json(), { code: "rate_limited", detail: /3 inbox token revocations in force/ });
    t.equal((await revokeAs(a, key, "cap-3")).status, 429, "a new user's too");
    t.equal((await revokeAs(a, key, "cap-1", ids[0])).status, 204, "a token it already revoked takes no new place");
    t.equal((await revokeAs(a, key, "cap-2")).status, 204, "nor a user it revoked all of");
    t.equal(revocationsB.heldBy("capped"), 0, "instance b holds none of them");
    t.equal((await revokeAs(b, key, "cap-1", newId())).status, 429, "Postgres refuses it on instance b too");
    t.equal((await revokeAs(b, key, "cap-4")).status, 429);
    t.equal((await revocationRows("capped")).length, 3, "nothing stored beyond the cap");
    t.equal((await revokeAs(b, other, "cap-1", newId())).status, 204, "another client has its own");

    // The rows' expiry passes: the purge gives the client its places back.
    await database.sql`update inbox_token_revocations set expires_at = now() - interval '1 second'
    where client_id = 'capped' and token_id = ${ids[1] as string}`;
    t.equal(await purgeExpiredInboxTokenRevocations(database), 1);
    t.equal((await revokeAs(b, key, "cap-1", newId())).status, 204, "a place freed by the purge");
  },
);
