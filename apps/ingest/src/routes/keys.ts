import { announceKeyChanged } from "@notify/bus";
import { AppError, SCOPES, type Scope, validate } from "@notify/core";
import { createKey, getKey, InactiveMinterError, type KeyManager, listKeys, revokeKey, rotateKey } from "@notify/db";
import { limitBody, readJson, toAppError } from "@notify/http";
import type { Context, Hono } from "hono";
import * as v from "valibot";
import { hasScope, type Principal } from "../auth/api-keys.js";
import type { AuthEnv } from "../auth/middleware.js";
import type { IngestDeps } from "../deps.js";
import { CreateKeyRequest, ListKeysQuery, RotateKeyRequest } from "../keys/schemas.js";
import { spreadChange } from "./announce.js";
import { type Contract, contract, Timestamp } from "./contract.js";

const ApiKeyRecord = v.object({
  id: v.string(),
  client_id: v.string(),
  name: v.string(),
  prefix: v.string(),
  scopes: v.array(v.picklist(SCOPES)),
  rate_limit: v.nullable(v.object({ burst: v.number(), per_second: v.number() })),
  status: v.picklist(["active", "grace", "revoked"]),
  created_at: Timestamp,
  revoked_at: v.nullable(Timestamp),
  last_used_at: v.nullable(Timestamp),
  minted_by: v.pipe(
    v.nullable(v.string()),
    v.metadata({
      description: "The key that minted this one through the API (null: the CLI); revoking it revokes this key",
    }),
  ),
});
const IssuedKey = v.object({ ...ApiKeyRecord.entries, key: v.string() });
const RotatedKey = v.object({ ...IssuedKey.entries, previous: ApiKeyRecord });
const KeyPage = v.object({
  data: v.array(ApiKeyRecord),
  page: v.number(),
  page_size: v.number(),
  total_count: v.number(),
});

const keys = (route: Omit<Contract, "tag" | "scope">) => contract({ ...route, tag: "API keys", scope: "admin" });

const postgres = <T>(work: Promise<T>): Promise<T> =>
  work.catch((error: unknown) => {
    throw toAppError(error);
  });

const unknownKey = (id: string) => new AppError("not_found", `API key ${id} does not exist`);

/** The client whose keys the caller manages: its own, or with `operator` any (null). */
const managedClient = (principal: Principal): string | null =>
  hasScope(principal, "operator") ? null : principal.clientId;

/**
 * Which keys the caller may rotate or revoke: an operator any; anyone else its own client's
 * keys that hold no scope it lacks (an admin key cannot rotate its client's operator key into a
 * fresh one for itself, nor revoke it).
 */
const manager = (principal: Principal): KeyManager =>
  hasScope(principal, "operator")
    ? { keyId: principal.keyId }
    : {
        keyId: principal.keyId,
        clientId: principal.clientId,
        scopes: SCOPES.filter((scope) => hasScope(principal, scope)),
      };

/** A revoked key, or one in a rotation's grace period, makes no keys. */
const inactive = (error: unknown): never => {
  if (error instanceof InactiveMinterError) {
    throw new AppError(
      "insufficient_scope",
      "this key is in a rotation's grace period (or revoked) and makes no keys; use its replacement",
    );
  }
  throw error;
};

const forbidden = (detail: string, scope: Scope = "operator") =>
  new AppError("insufficient_scope", detail, {
    context: { wwwAuthenticate: `Bearer realm="notify", error="insufficient_scope", scope="${scope}"` },
  });

/** A body is optional on rotate: an empty one stands for `{}`. */
async function readOptionalJson(c: Context): Promise<unknown> {
  return (await c.req.text()).trim() === "" ? {} : readJson(c);
}

/**
 * The API for API keys. An `admin` key manages its own client's keys and mints keys with no
 * scope it lacks itself; an `operator` key manages every client's. Each key records the key
 * that minted it, and revoking a key revokes every key minted from it. Answers that carry a
 * plaintext key are never cached.
 */
export function mountKeys(v1: Hono<AuthEnv>, deps: IngestDeps): void {
  // A key created, revoked or rotated here reaches every ingest instance's caches at once.
  const keyChanged = (c: Context<AuthEnv>, id: string) =>
    spreadChange(c, {
      forget: () => deps.lookupKey.forget(id),
      announce: () => announceKeyChanged(deps.bus, { key_id: id }),
      fields: { target_key_id: id },
      within: "AUTH_CACHE_TTL_SECONDS",
    });

  v1.post(
    "/keys",
    keys({
      summary: "Issue an API key",
      description:
        "The plaintext key is in this answer only; the service stores its SHA-256. client_id defaults to the caller's client; another client's needs the operator scope, and no scope the caller lacks can be granted. The new key records the key that minted it: revoking that key revokes this one.",
      body: CreateKeyRequest,
      responses: {
        201: { description: "The new key, shown once", schema: IssuedKey, headers: { Location: "The key's URL" } },
      },
      problems: [
        "validation_failed",
        "malformed_json",
        "payload_too_large",
        "unsupported_media_type",
        "insufficient_scope",
      ],
    }),
    limitBody(deps.maxBodyBytes),
    async (c) => {
      const body = validate(CreateKeyRequest, await readJson(c));
      const principal = c.get("principal");
      const own = managedClient(principal);
      const clientId = body.client_id ?? principal.clientId;
      if (own !== null && clientId !== own) {
        throw forbidden("a key is minted for another client only with the operator scope");
      }
      const beyond = body.scopes.filter((scope) => !hasScope(principal, scope));
      if (beyond.length > 0) {
        throw forbidden(`a key cannot grant a scope it does not hold: ${beyond.join(", ")}`, beyond[0]);
      }
      const issued = await postgres(
        createKey(deps.database, {
          clientId,
          name: body.name,
          scopes: body.scopes,
          rateLimit: body.rate_limit && { burst: body.rate_limit.burst, perSecond: body.rate_limit.per_second },
          mintedBy: principal.keyId,
        }).catch(inactive),
      );
      await keyChanged(c, issued.id);
      c.get("log").info({ target_key_id: issued.id, target_client_id: issued.client_id }, "API key created");
      c.header("cache-control", "no-store");
      c.header("location", `/api/v1/keys/${issued.id}`);
      return c.json(issued, 201);
    },
  );

  v1.get(
    "/keys",
    keys({
      summary: "List API keys",
      description: "The caller's client's keys; with the operator scope every client's (client_id filters).",
      query: ListKeysQuery,
      responses: { 200: { description: "A page of keys, newest first (offset pagination)", schema: KeyPage } },
      problems: ["validation_failed", "insufficient_scope"],
    }),
    async (c) => {
      const query = validate(ListKeysQuery, c.req.query());
      const own = managedClient(c.get("principal"));
      if (own !== null && query.client_id !== undefined && query.client_id !== own) {
        throw forbidden("another client's keys are listed only with the operator scope");
      }
      const { data, total_count } = await postgres(
        listKeys(deps.database, {
          clientId: own ?? query.client_id,
          includeRevoked: query.include_revoked,
          page: query.page,
          pageSize: query.page_size,
        }),
      );
      return c.json({ data, page: query.page, page_size: query.page_size, total_count });
    },
  );

  v1.get(
    "/keys/:id",
    keys({
      summary: "Read an API key",
      description: "Another client's key is a 404 without the operator scope.",
      responses: { 200: { description: "The key's record (never the key or its hash)", schema: ApiKeyRecord } },
      problems: ["not_found"],
    }),
    async (c) => {
      const id = c.req.param("id");
      const key = await postgres(getKey(deps.database, id, managedClient(c.get("principal")) ?? undefined));
      if (!key) throw unknownKey(id);
      return c.json(key);
    },
  );

  v1.post(
    "/keys/:id/rotate",
    keys({
      summary: "Rotate an API key",
      description:
        "Issues a replacement with the same client, scopes and limits, minted by the calling key; the old key works until the grace period ends, and the keys it minted are the replacement's. A revoked key is not rotated. Without the operator scope, another client's key, or one holding a scope the caller lacks, is a 404; a key in a grace period rotates nothing (403).",
      body: RotateKeyRequest,
      responses: { 201: { description: "The new key, shown once, and the old key's record", schema: RotatedKey } },
      problems: [
        "validation_failed",
        "malformed_json",
        "not_found",
        "payload_too_large",
        "unsupported_media_type",
        "insufficient_scope",
      ],
    }),
    limitBody(deps.maxBodyBytes),
    async (c) => {
      const id = c.req.param("id");
      const body = validate(RotateKeyRequest, await readOptionalJson(c));
      const rotated = await postgres(
        rotateKey(deps.database, id, { graceSeconds: body.grace_seconds, by: manager(c.get("principal")) }).catch(
          inactive,
        ),
      );
      if (!rotated) throw unknownKey(id);
      await keyChanged(c, id);
      await keyChanged(c, rotated.id);
      c.get("log").info(
        { target_key_id: rotated.id, replaced_key_id: id, replaced_until: rotated.previous.revoked_at },
        "API key rotated",
      );
      c.header("cache-control", "no-store");
      c.header("location", `/api/v1/keys/${rotated.id}`);
      return c.json(rotated, 201);
    },
  );

  v1.delete(
    "/keys/:id",
    keys({
      summary: "Revoke an API key",
      description:
        "Revokes the key now, ending any grace period, and every key minted from it through the API, however deep, except the calling key and what it minted (so the holder of a replacement can end the old key's grace). Without the operator scope, another client's key, or one holding a scope the caller lacks, is a 404.",
      responses: { 204: { description: "Revoked" } },
      problems: ["not_found"],
    }),
    async (c) => {
      const id = c.req.param("id");
      const revoked = await postgres(revokeKey(deps.database, id, manager(c.get("principal"))));
      if (!revoked) throw unknownKey(id);
      for (const changed of [id, ...revoked.cascaded]) await keyChanged(c, changed);
      c.get("log").info(
        { target_key_id: id, target_client_id: revoked.client_id, cascaded_key_ids: revoked.cascaded },
        "API key revoked",
      );
      return c.body(null, 204);
    },
  );
}
