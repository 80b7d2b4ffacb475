import { AppError, validate, WEBHOOK_EVENT_TYPES, WEBHOOK_INCLUDES, webhookUrlProblem } from "@notify/core";
import {
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  listDeadDeliveries,
  listEndpoints,
  listWebhookAttempts,
  type ReplaySelection,
  readEndpointFigures,
  replayWebhookEvents,
  rotateEndpointSecret,
  sendWebhookPing,
  updateEndpoint,
} from "@notify/db";
import { limitBody, readJson, toAppError } from "@notify/http";
import type { Context, Hono } from "hono";
import * as v from "valibot";
import { hasScope } from "../auth/api-keys.js";
import type { AuthEnv } from "../auth/middleware.js";
import type { IngestDeps } from "../deps.js";
import {
  CreateEndpointRequest,
  LimitQuery,
  MAX_ENDPOINTS_PER_CLIENT,
  MAX_REPLAY_SECONDS,
  ReplayRequest,
  RotateSecretRequest,
  UpdateEndpointRequest,
} from "../webhooks/schemas.js";
import { type Contract, contract, Timestamp } from "./contract.js";

const EndpointRecord = v.object({
  id: v.string(),
  client_id: v.string(),
  url: v.string(),
  event_types: v.nullable(v.array(v.picklist(WEBHOOK_EVENT_TYPES))),
  include: v.array(v.picklist(WEBHOOK_INCLUDES)),
  description: v.nullable(v.string()),
  status: v.picklist(["enabled", "disabled"]),
  disabled_reason: v.pipe(
    v.nullable(v.picklist(["by_client", "failing"])),
    v.metadata({ description: "by_client, or failing: every attempt failed for WEBHOOK_DISABLE_AFTER_HOURS" }),
  ),
  disabled_at: v.nullable(Timestamp),
  failing_since: v.nullable(Timestamp),
  previous_secret_expires_at: v.nullable(Timestamp),
  created_at: Timestamp,
  updated_at: Timestamp,
});
const IssuedEndpoint = v.object({
  ...EndpointRecord.entries,
  secret: v.pipe(v.string(), v.metadata({ description: "The signing secret (whsec_…), shown once" })),
});
const EndpointList = v.object({ data: v.array(EndpointRecord) });
const Figures = v.object({
  backlog: v.number(),
  dead: v.number(),
  last_hour: v.object({
    attempts: v.number(),
    succeeded: v.number(),
    failed: v.number(),
    latency_ms_p50: v.nullable(v.number()),
    latency_ms_p95: v.nullable(v.number()),
  }),
});
const AttemptList = v.object({
  data: v.array(
    v.object({
      event_id: v.string(),
      event_type: v.string(),
      run: v.pipe(
        v.number(),
        v.metadata({ description: "The delivery's run: 0 for its first attempts, one more for each replay" }),
      ),
      attempt: v.pipe(v.number(), v.metadata({ description: "The attempt within its run, from 1" })),
      status_code: v.nullable(v.number()),
      latency_ms: v.number(),
      error: v.nullable(v.string()),
      at: Timestamp,
    }),
  ),
});
const DeadList = v.object({
  data: v.array(
    v.object({
      event_id: v.string(),
      event_type: v.string(),
      attempts: v.number(),
      last_error: v.nullable(v.string()),
      occurred_at: Timestamp,
      died_at: Timestamp,
    }),
  ),
});

const EndpointsWithFigures = v.object({ data: v.array(v.object({ ...EndpointRecord.entries, figures: Figures })) });

const endpoints = (route: Omit<Contract, "tag" | "scope">) =>
  contract({ ...route, tag: "Webhook endpoints", scope: "webhooks" });

const postgres = <T>(work: Promise<T>): Promise<T> =>
  work.catch((error: unknown) => {
    throw toAppError(error);
  });

const unknownEndpoint = (id: string) => new AppError("not_found", `webhook endpoint ${id} does not exist`);

/** A body is optional on some routes: an empty one stands for `{}`. */
async function readOptionalJson(c: Context): Promise<unknown> {
  return (await c.req.text()).trim() === "" ? {} : readJson(c);
}

/** What a replay's body selects: event ids, or a range of at most MAX_REPLAY_SECONDS (until: now). */
function replaySelection(body: v.InferOutput<typeof ReplayRequest>): ReplaySelection {
  if (body.event_ids !== undefined) return { eventIds: body.event_ids.map((e) => Number(e.slice(4))) };
  const since = new Date(body.since as string);
  const until = body.until === undefined ? new Date() : new Date(body.until);
  if (until.getTime() <= since.getTime()) throw new AppError("validation_failed", "until must be after since");
  if (until.getTime() - since.getTime() > MAX_REPLAY_SECONDS * 1000) {
    throw new AppError("validation_failed", `a replay covers at most ${MAX_REPLAY_SECONDS / 86_400} days`);
  }
  return { since, until };
}

/** Whose endpoint a route reaches: a client's, or (null) any client's, for the operator. */
type Owner = (c: Context<AuthEnv>) => string | null;
const callersClient: Owner = (c) => c.get("principal").clientId;
const anyClient: Owner = () => null;

/**
 * What an endpoint's `include` asks for is for a key that may have it otherwise: addresses for
 * one that may read them (the contacts API's scope), a notification's data for one that may send
 * it. A change that sends an endpoint's events elsewhere or again (its url, types, or enabling it)
 * is checked against what it includes already, so a key without those scopes cannot point an
 * endpoint that includes them at its own receiver.
 */
const INCLUDE_SCOPES = { recipient: "contacts", notification_data: "ingest" } as const;
const checkInclude = (c: Context<AuthEnv>, include: readonly string[] | undefined) => {
  for (const item of include ?? []) {
    const scope = INCLUDE_SCOPES[item as keyof typeof INCLUDE_SCOPES];
    if (scope !== undefined && !hasScope(c.get("principal"), scope)) {
      throw new AppError("insufficient_scope", `include ${item} needs a key with the ${scope} scope`, {
        context: { wwwAuthenticate: `Bearer realm="notify", error="insufficient_scope", scope="${scope}"` },
      });
    }
  }
};

const checkUrl = (url: string, allowPrivateNetworks: boolean) => {
  const problem = webhookUrlProblem(url, allowPrivateNetworks);
  if (problem !== null) {
    throw new AppError("validation_failed", problem, { fields: [{ field: "url", message: problem }] });
  }
};

/**
 * Outbound webhook endpoints: a client registers where its events are posted, signed per
 * Standard Webhooks. Every route needs the `webhooks` scope (admin and operator include it) and
 * reaches only the caller's own client's endpoints: another client's is a 404.
 */
export function mountWebhooks(v1: Hono<AuthEnv>, deps: IngestDeps): void {
  const allowPrivate = deps.webhookAllowPrivateNetworks === true;

  // The client's and the operator's routes to an endpoint's dead letters and replays differ
  // only in whose endpoint they reach.
  const listDeadLetters = (owner: Owner) => async (c: Context<AuthEnv, "/:id">) => {
    const id = c.req.param("id");
    const { limit } = validate(LimitQuery, c.req.query());
    const data = await postgres(listDeadDeliveries(deps.database, owner(c), id, limit));
    if (!data) throw unknownEndpoint(id);
    return c.json({ data });
  };
  const replay = (owner: Owner) => async (c: Context<AuthEnv, "/:id">) => {
    const id = c.req.param("id");
    const selection = replaySelection(validate(ReplayRequest, await readJson(c)));
    const clientId = owner(c);
    const replayed = await postgres(replayWebhookEvents(deps.database, clientId, id, selection));
    if (replayed === undefined) throw unknownEndpoint(id);
    c.get("log").info(
      { endpoint_id: id, replayed },
      clientId === null ? "webhook events replayed by the operator" : "webhook events replayed",
    );
    return c.json({ replayed }, 202);
  };

  v1.post(
    "/webhook-endpoints",
    endpoints({
      summary: "Register a webhook endpoint",
      description: `Events of the caller's client are posted to url (https, a public host), signed per Standard Webhooks with the secret in this answer, shown once. event_types limits which (absent: every type). include adds the notification's template data (notification_data, which needs the ingest scope) or the user's address (recipient, which needs the contacts scope) to its events. At most ${MAX_ENDPOINTS_PER_CLIENT} endpoints per client.`,
      body: CreateEndpointRequest,
      responses: {
        201: { description: "The endpoint with its secret", schema: IssuedEndpoint, headers: { Location: "Its URL" } },
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
      const body = validate(CreateEndpointRequest, await readJson(c));
      checkUrl(body.url, allowPrivate);
      checkInclude(c, body.include);
      const endpoint = await postgres(
        createEndpoint(
          deps.database,
          c.get("principal").clientId,
          {
            url: body.url,
            eventTypes: body.event_types ?? null,
            include: body.include ?? [],
            description: body.description ?? null,
          },
          MAX_ENDPOINTS_PER_CLIENT,
        ),
      );
      if (endpoint === "limit_reached") {
        throw new AppError(
          "validation_failed",
          `a client may have at most ${MAX_ENDPOINTS_PER_CLIENT} webhook endpoints`,
        );
      }
      c.get("log").info({ endpoint_id: endpoint.id }, "webhook endpoint created");
      c.header("cache-control", "no-store");
      c.header("location", `/api/v1/webhook-endpoints/${endpoint.id}`);
      return c.json(endpoint, 201);
    },
  );

  v1.get(
    "/webhook-endpoints",
    endpoints({
      summary: "List webhook endpoints",
      description: "The caller's client's endpoints, oldest first (never their secrets).",
      responses: { 200: { description: "The endpoints", schema: EndpointList } },
      problems: [],
    }),
    async (c) => {
      const data = await postgres(listEndpoints(deps.database, c.get("principal").clientId));
      return c.json({ data });
    },
  );

  v1.get(
    "/webhook-endpoints/:id",
    endpoints({
      summary: "Read a webhook endpoint",
      description: "The endpoint, its status (disabled_reason failing: the service disabled it) and its figures.",
      responses: {
        200: {
          description: "The endpoint and its figures",
          schema: v.object({ ...EndpointRecord.entries, figures: Figures }),
        },
      },
      problems: ["not_found"],
    }),
    async (c) => {
      const id = c.req.param("id");
      const clientId = c.get("principal").clientId;
      const endpoint = await postgres(getEndpoint(deps.database, clientId, id));
      if (!endpoint) throw unknownEndpoint(id);
      const figures = await postgres(readEndpointFigures(deps.database, clientId, [id]));
      return c.json({ ...endpoint, figures: figures.get(id) });
    },
  );

  v1.patch(
    "/webhook-endpoints/:id",
    endpoints({
      summary: "Change a webhook endpoint",
      description:
        "Changes what is given: url, event_types (null: every type), include, description, enabled. Enabling a disabled endpoint forgets its failures; what it missed meanwhile is replayed with POST …/replay. Changing url or event_types, or enabling, an endpoint whose include has recipient or notification_data needs the scopes those need (contacts, ingest).",
      body: UpdateEndpointRequest,
      responses: { 200: { description: "The endpoint", schema: EndpointRecord } },
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
      const id = c.req.param("id");
      const body = validate(UpdateEndpointRequest, await readJson(c));
      if (body.url !== undefined) checkUrl(body.url, allowPrivate);
      const redirects = body.url !== undefined || body.event_types !== undefined || body.enabled === true;
      if (body.include !== undefined) checkInclude(c, body.include);
      else if (redirects) {
        const current = await postgres(getEndpoint(deps.database, c.get("principal").clientId, id));
        if (!current) throw unknownEndpoint(id);
        checkInclude(c, current.include);
      }
      const endpoint = await postgres(
        updateEndpoint(deps.database, c.get("principal").clientId, id, {
          url: body.url,
          eventTypes: body.event_types,
          include: body.include,
          description: body.description,
          enabled: body.enabled,
        }),
      );
      if (!endpoint) throw unknownEndpoint(id);
      c.get("log").info({ endpoint_id: id, status: endpoint.status }, "webhook endpoint changed");
      return c.json(endpoint);
    },
  );

  v1.delete(
    "/webhook-endpoints/:id",
    endpoints({
      summary: "Delete a webhook endpoint",
      description: "Nothing more is posted to it; its deliveries and attempts are deleted with it.",
      responses: { 204: { description: "Deleted" } },
      problems: ["not_found"],
    }),
    async (c) => {
      const id = c.req.param("id");
      if (!(await postgres(deleteEndpoint(deps.database, c.get("principal").clientId, id)))) throw unknownEndpoint(id);
      c.get("log").info({ endpoint_id: id }, "webhook endpoint deleted");
      return c.body(null, 204);
    },
  );

  v1.post(
    "/webhook-endpoints/:id/rotate-secret",
    endpoints({
      summary: "Rotate an endpoint's signing secret",
      description:
        "A new secret, shown once; for grace_seconds (default a day) every post carries a signature under the previous secret too, so the receiver can switch without refusing one.",
      body: RotateSecretRequest,
      responses: { 200: { description: "The endpoint with its new secret", schema: IssuedEndpoint } },
      problems: ["validation_failed", "malformed_json", "payload_too_large", "unsupported_media_type", "not_found"],
    }),
    limitBody(deps.maxBodyBytes),
    async (c) => {
      const id = c.req.param("id");
      const body = validate(RotateSecretRequest, await readOptionalJson(c));
      const endpoint = await postgres(
        rotateEndpointSecret(deps.database, c.get("principal").clientId, id, body.grace_seconds),
      );
      if (!endpoint) throw unknownEndpoint(id);
      c.get("log").info({ endpoint_id: id, grace_seconds: body.grace_seconds }, "webhook endpoint secret rotated");
      c.header("cache-control", "no-store");
      return c.json(endpoint);
    },
  );

  v1.get(
    "/webhook-endpoints/:id/attempts",
    endpoints({
      summary: "List an endpoint's attempts",
      description:
        "Its latest posts, newest first: the event, the run (0, then one more for each replay of the event) and the attempt within it, the status code (null: no answer), latency and error.",
      query: LimitQuery,
      responses: { 200: { description: "The attempts", schema: AttemptList } },
      problems: ["not_found"],
    }),
    async (c) => {
      const id = c.req.param("id");
      const { limit } = validate(LimitQuery, c.req.query());
      const data = await postgres(listWebhookAttempts(deps.database, c.get("principal").clientId, id, limit));
      if (!data) throw unknownEndpoint(id);
      return c.json({ data });
    },
  );

  v1.get(
    "/webhook-endpoints/:id/dead-letters",
    endpoints({
      summary: "List an endpoint's dead letters",
      description:
        "Events whose every attempt failed (or that were owed when the endpoint was disabled), newest first.",
      query: LimitQuery,
      responses: { 200: { description: "The dead letters", schema: DeadList } },
      problems: ["not_found"],
    }),
    listDeadLetters(callersClient),
  );

  v1.post(
    "/webhook-endpoints/:id/replay",
    endpoints({
      summary: "Replay events to an endpoint",
      description: `Posts again the client's events of the types the endpoint wants, in a time range (since, until: now by default; at most ${MAX_REPLAY_SECONDS / 86_400} days) or by id, whatever became of them before (dead letters included); each keeps its webhook-id, so a receiver that saw one drops it.`,
      body: ReplayRequest,
      responses: { 202: { description: "How many events are owed again", schema: v.object({ replayed: v.number() }) } },
      problems: ["validation_failed", "malformed_json", "payload_too_large", "unsupported_media_type", "not_found"],
    }),
    limitBody(deps.maxBodyBytes),
    replay(callersClient),
  );

  v1.get(
    "/ops/webhook-endpoints",
    contract({
      summary: "Every client's webhook endpoints",
      description:
        "The operator's view (the console's Webhooks page): every endpoint with its status and figures: deliveries owed (backlog), dead letters, the last hour's attempts, failures and latency.",
      tag: "Operations",
      scope: "operator",
      responses: { 200: { description: "The endpoints", schema: EndpointsWithFigures } },
      problems: [],
    }),
    async (c) => {
      const all = await postgres(listEndpoints(deps.database, null));
      const figures = await postgres(
        readEndpointFigures(
          deps.database,
          null,
          all.map((e) => e.id),
        ),
      );
      return c.json({ data: all.map((endpoint) => ({ ...endpoint, figures: figures.get(endpoint.id) })) });
    },
  );

  v1.get(
    "/ops/webhook-endpoints/:id/dead-letters",
    contract({
      summary: "Any client's endpoint's dead letters",
      description: "The operator's view of one endpoint's dead letters (the console's endpoint page), newest first.",
      tag: "Operations",
      scope: "operator",
      query: LimitQuery,
      responses: { 200: { description: "The dead letters", schema: DeadList } },
      problems: ["not_found"],
    }),
    listDeadLetters(anyClient),
  );

  v1.post(
    "/ops/webhook-endpoints/:id/replay",
    contract({
      summary: "Replay events to any client's endpoint",
      description: "As POST /webhook-endpoints/{id}/replay, for the operator: dead letters after a receiver's outage.",
      tag: "Operations",
      scope: "operator",
      body: ReplayRequest,
      responses: { 202: { description: "How many events are owed again", schema: v.object({ replayed: v.number() }) } },
      problems: ["validation_failed", "malformed_json", "payload_too_large", "unsupported_media_type", "not_found"],
    }),
    limitBody(deps.maxBodyBytes),
    replay(anyClient),
  );

  v1.post(
    "/webhook-endpoints/:id/test",
    endpoints({
      summary: "Send a ping event",
      description: "Posts a ping event to this endpoint alone, signed like every event; its attempts show how it went.",
      responses: { 202: { description: "The ping's event id", schema: v.object({ event_id: v.string() }) } },
      problems: ["not_found"],
    }),
    async (c) => {
      const id = c.req.param("id");
      const eventId = await postgres(sendWebhookPing(deps.database, c.get("principal").clientId, id));
      if (eventId === undefined) throw unknownEndpoint(id);
      return c.json({ event_id: eventId }, 202);
    },
  );
}
