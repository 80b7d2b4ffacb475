import { AppError, suppressionAddress, validate } from "@notify/core";
import {
  listSuppressions,
  putSuppression,
  removeSuppression,
  SUPPRESSIBLE_CHANNELS,
  SUPPRESSION_REASONS,
  type SuppressibleChannel,
  type SuppressionEntry,
  type SuppressionSource,
  suppressionsOf,
} from "@notify/db";
import { type Counter, limitBody, type MetricsRegistry, readJson, toAppError } from "@notify/http";
import type { Context, Hono } from "hono";
import * as v from "valibot";
import { hasScope } from "../auth/api-keys.js";
import type { AuthEnv } from "../auth/middleware.js";
import type { IngestDeps } from "../deps.js";
import {
  DEFAULT_LIMIT,
  DeleteSuppressionQuery,
  type EntryScope,
  ListSuppressionsQuery,
  MAX_LIMIT,
  PutSuppressionRequest,
} from "../suppressions/schemas.js";
import { type Contract, contract, Timestamp } from "./contract.js";

const Entry = v.object({
  channel: v.picklist(SUPPRESSIBLE_CHANNELS),
  address: v.pipe(v.string(), v.metadata({ description: "As kept: an email lower-cased, a phone number in E.164" })),
  scope: v.pipe(
    v.picklist(["client", "all_clients"]),
    v.metadata({ description: "client: holds for client_id only; all_clients: for every client" }),
  ),
  client_id: v.nullable(v.string()),
  reason: v.picklist(SUPPRESSION_REASONS),
  source: v.pipe(
    v.object({
      provider: v.optional(v.string()),
      event: v.optional(v.string()),
      event_id: v.optional(v.string()),
      notification_id: v.optional(v.string()),
      key_id: v.optional(v.string()),
      note: v.optional(v.string()),
    }),
    v.metadata({
      description:
        "What put it on the list: a provider's event, or the key that added it and its note. Of an all_clients entry a client key sees the provider and event only.",
    }),
  ),
  created_at: Timestamp,
});
const EntryList = v.object({ data: v.array(Entry), next_cursor: v.nullable(v.string()) });
const AddressEntries = v.object({
  channel: v.picklist(SUPPRESSIBLE_CHANNELS),
  address: v.string(),
  entries: v.array(Entry),
});

const suppressionsContract = (route: Omit<Contract, "tag" | "scope">) =>
  contract({ ...route, tag: "Suppressions", scope: "contacts" });

const postgres = <T>(work: Promise<T>): Promise<T> =>
  work.catch((error: unknown) => {
    throw toAppError(error);
  });

/** Suppressions added through the API, by reason; a no-op without a registry (most tests). */
function addedCounter(metrics: MetricsRegistry | undefined): Counter {
  if (metrics === undefined) return { inc: () => {} };
  return metrics.counter(
    "notify_api_suppressions_added_total",
    "Addresses added to the suppression list through the API, by reason",
    ["reason"],
  );
}

const isOperator = (c: Context<AuthEnv>) => hasScope(c.get("principal"), "operator");

const needsOperator = (what: string) =>
  new AppError("insufficient_scope", `${what} needs a key with the operator scope`, {
    context: { wwwAuthenticate: 'Bearer realm="notify", error="insufficient_scope", scope="operator"' },
  });

/** The channel and the normalised address a path names: 404 for another channel, 400 for a bad address. */
function pathAddress(c: Context<AuthEnv>): { channel: SuppressibleChannel; address: string } {
  const channel = c.req.param("channel") ?? "";
  if (!(SUPPRESSIBLE_CHANNELS as readonly string[]).includes(channel)) {
    throw new AppError("not_found", `addresses are suppressed on ${SUPPRESSIBLE_CHANNELS.join(" and ")} only`);
  }
  const address = suppressionAddress(channel, c.req.param("address") ?? "");
  if (address === null) {
    const message = channel === "email" ? "not an email address" : "not a phone number (E.164)";
    throw new AppError("validation_failed", `address: ${message}`, { fields: [{ field: "address", message }] });
  }
  return { channel: channel as SuppressibleChannel, address };
}

/**
 * An entry as the API shows it. What a provider reported for every client names the event and
 * the notification that met it, which may be another client's: a client key sees the provider
 * and event only; the operator sees it whole.
 */
function view(entry: SuppressionEntry, operator: boolean) {
  const everyClient = entry.client_id === "";
  const source: SuppressionSource =
    everyClient && !operator
      ? {
          ...(entry.source.provider === undefined ? {} : { provider: entry.source.provider }),
          ...(entry.source.event === undefined ? {} : { event: entry.source.event }),
        }
      : entry.source;
  return {
    channel: entry.channel,
    address: entry.address,
    scope: (everyClient ? "all_clients" : "client") as EntryScope,
    client_id: everyClient ? null : entry.client_id,
    reason: entry.reason,
    source,
    created_at: entry.created_at.toISOString(),
  };
}

/** A body is optional: an empty one stands for `{}`. */
async function readOptionalJson(c: Context): Promise<unknown> {
  return (await c.req.text()).trim() === "" ? {} : readJson(c);
}

/**
 * The suppression list: addresses nothing is sent to on a channel. A key with the `contacts`
 * scope reads the entries that hold for its client (its own and every client's) and adds and
 * removes its client's own; an operator key also reads any client's and adds and removes the
 * entries that hold for every client, which a client cannot lift.
 */
export function mountSuppressions(v1: Hono<AuthEnv>, deps: IngestDeps): void {
  const added = addedCounter(deps.metrics);

  v1.get(
    "/suppressions",
    suppressionsContract({
      summary: "List suppressed addresses",
      description: `The entries that hold for the caller's client (its own and every client's), newest first, ${DEFAULT_LIMIT} a page unless limit says (at most ${MAX_LIMIT}); next_cursor continues the list with the same filters. An operator key may add client (a client's id, or * for every entry).`,
      query: ListSuppressionsQuery,
      responses: { 200: { description: "A page of entries", schema: EntryList } },
      problems: ["validation_failed", "invalid_cursor", "insufficient_scope"],
    }),
    async (c) => {
      const query = validate(ListSuppressionsQuery, c.req.query());
      const operator = isOperator(c);
      if (query.client !== undefined && !operator) throw needsOperator("client");
      const clientId =
        query.client === undefined ? c.get("principal").clientId : query.client === "*" ? null : query.client;
      const page = await postgres(
        listSuppressions(deps.database, {
          clientId,
          ...(query.channel === undefined ? {} : { channel: query.channel }),
          ...(query.reason === undefined ? {} : { reason: query.reason }),
          ...(query.address_prefix === undefined ? {} : { address_prefix: query.address_prefix.toLowerCase() }),
          ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
          limit: query.limit,
          cursorSecret: deps.cursorSecret,
        }),
      );
      return c.json({ data: page.data.map((entry) => view(entry, operator)), next_cursor: page.next_cursor });
    },
  );

  v1.get(
    "/suppressions/:channel/:address",
    suppressionsContract({
      summary: "Read an address's suppressions",
      description:
        "The entries for this address (URL-encoded; compared as kept: an email lower-cased, a phone number in E.164) that hold for the caller's client: its own and every client's.",
      responses: { 200: { description: "The address's entries", schema: AddressEntries } },
      problems: ["validation_failed", "not_found"],
    }),
    async (c) => {
      const { channel, address } = pathAddress(c);
      const entries = await postgres(
        suppressionsOf(deps.database, c.get("principal").clientId, [{ channel, address }]),
      );
      if (entries.length === 0) throw new AppError("not_found", "the address is not suppressed for this client");
      const operator = isOperator(c);
      return c.json({ channel, address, entries: entries.map((entry) => view(entry, operator)) });
    },
  );

  v1.put(
    "/suppressions/:channel/:address",
    suppressionsContract({
      summary: "Suppress an address",
      description:
        "Nothing more is sent to the address on the channel for the caller's client (scope client, the default), or for every client (scope all_clients: operator keys only). reason defaults to manual; note is kept with the key that added it. The first entry is kept: a second PUT answers 200 with it, unchanged.",
      body: PutSuppressionRequest,
      responses: {
        201: { description: "Added", schema: Entry },
        200: { description: "It was there already: the first entry", schema: Entry },
      },
      problems: [
        "validation_failed",
        "malformed_json",
        "payload_too_large",
        "unsupported_media_type",
        "not_found",
        "insufficient_scope",
      ],
    }),
    limitBody(deps.maxBodyBytes),
    async (c) => {
      const { channel, address } = pathAddress(c);
      const body = validate(PutSuppressionRequest, await readOptionalJson(c));
      if (body.scope === "all_clients" && !isOperator(c)) throw needsOperator("scope all_clients");
      const principal = c.get("principal");
      const clientId = body.scope === "all_clients" ? "" : principal.clientId;
      const source: SuppressionSource = {
        key_id: principal.keyId,
        ...(body.note === undefined ? {} : { note: body.note }),
      };
      const { entry, added: isNew } = await postgres(
        putSuppression(deps.database, { channel, address, client_id: clientId, reason: body.reason, source }),
      );
      if (isNew) {
        added.inc({ reason: body.reason });
        c.get("log").info({ channel, reason: body.reason, scope: body.scope }, "suppression added");
      }
      return c.json(view(entry, isOperator(c)), isNew ? 201 : 200);
    },
  );

  v1.delete(
    "/suppressions/:channel/:address",
    suppressionsContract({
      summary: "Lift an address's suppression",
      description:
        "Removes the caller's client's own entry (scope client, the default), or the entry that holds for every client (scope all_clients: operator keys only; a client cannot lift what a provider reported). note says why (at most 500 characters, no control characters); it is logged with the key that removed the entry, and not stored: the entry is gone.",
      query: DeleteSuppressionQuery,
      responses: { 204: { description: "Removed" } },
      problems: ["validation_failed", "not_found", "insufficient_scope"],
    }),
    async (c) => {
      const { channel, address } = pathAddress(c);
      const { scope, note } = validate(DeleteSuppressionQuery, c.req.query());
      if (scope === "all_clients" && !isOperator(c)) throw needsOperator("scope all_clients");
      const clientId = scope === "all_clients" ? "" : c.get("principal").clientId;
      if (!(await postgres(removeSuppression(deps.database, channel, address, clientId)))) {
        throw new AppError(
          "not_found",
          `the address has no ${scope === "all_clients" ? "all_clients" : "client"} entry`,
        );
      }
      // The log's bindings name the key (key_id) and its client; the note says why.
      c.get("log").info({ channel, scope, ...(note ? { note } : {}) }, "suppression removed");
      return c.body(null, 204);
    },
  );
}
