import { SCOPES } from "@notify/core";
import * as v from "valibot";
import { offsetPageQuery } from "../pagination.js";

/** Rotation grace periods are for switching callers over, not for keeping two keys alive. */
export const MAX_GRACE_SECONDS = 7 * 24 * 3600;
/** Ceiling of either rate-limit parameter; the column is a 32-bit integer. */
export const MAX_RATE = 1_000_000;

const ClientId = v.pipe(
  v.string("client_id must be a string"),
  v.regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/, "client_id must be 1-64 of A-Z, a-z, 0-9, '_', '.', ':', '-'"),
);

const rate = (field: string) =>
  v.pipe(
    v.number(`${field} must be a number`),
    v.integer(`${field} must be an integer`),
    v.minValue(1, `${field} must be at least 1`),
    v.maxValue(MAX_RATE, `${field} must be at most ${MAX_RATE}`),
  );

/** Body of POST /api/v1/keys. */
export const CreateKeyRequest = v.strictObject({
  name: v.pipe(
    v.string("name must be a string"),
    v.trim(),
    v.minLength(1, "name must not be empty"),
    v.maxLength(128, "name must be at most 128 characters"),
    v.regex(/^[^\p{Cc}]+$/u, "name must not contain control characters"),
  ),
  /** Absent: the caller's own client. */
  client_id: v.optional(ClientId),
  scopes: v.pipe(
    v.array(v.picklist(SCOPES, `scopes may only contain ${SCOPES.join(", ")}`), "scopes must be an array"),
    v.minLength(1, "scopes must not be empty"),
    v.checkItems((item, index, array) => array.indexOf(item) === index, "scopes must not repeat"),
  ),
  /** The key's inbound leaky bucket; absent: the service defaults. */
  rate_limit: v.optional(
    v.strictObject({ burst: rate("rate_limit.burst"), per_second: rate("rate_limit.per_second") }),
  ),
});
export type CreateKeyRequest = v.InferOutput<typeof CreateKeyRequest>;

/** Body of POST /api/v1/keys/{id}/rotate; an empty body means no grace period. */
export const RotateKeyRequest = v.strictObject({
  /** How long the replaced key keeps working. */
  grace_seconds: v.optional(
    v.pipe(
      v.number("grace_seconds must be a number"),
      v.integer("grace_seconds must be an integer"),
      v.minValue(0, "grace_seconds must not be negative"),
      v.maxValue(MAX_GRACE_SECONDS, `grace_seconds must be at most ${MAX_GRACE_SECONDS}`),
    ),
    0,
  ),
});
export type RotateKeyRequest = v.InferOutput<typeof RotateKeyRequest>;

/** Query of GET /api/v1/keys (offset pagination). */
export const ListKeysQuery = v.strictObject({
  client_id: v.optional(ClientId),
  /** Also list keys whose revocation has taken effect. */
  include_revoked: v.optional(
    v.pipe(
      v.picklist(["true", "false"], "include_revoked must be true or false"),
      v.transform((value) => value === "true"),
    ),
    "false",
  ),
  ...offsetPageQuery,
});
export type ListKeysQuery = v.InferOutput<typeof ListKeysQuery>;
