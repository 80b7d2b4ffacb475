import { validate } from "@notify/core";
import { listContactChanges } from "@notify/db";
import { toAppError } from "@notify/http";
import type { Hono } from "hono";
import * as v from "valibot";
import type { AuthEnv } from "../auth/middleware.js";
import { changeAnyBroadcast, listAnyBroadcasts } from "../broadcasts/progress.js";
import type { IngestDeps } from "../deps.js";
import { getAnyNotification } from "../notifications/get.js";
import { listProviders } from "../ops/providers.js";
import {
  OpsBroadcastPage,
  OpsBroadcastsQuery,
  OpsBroadcastView,
  OpsNotificationsQuery,
  ProviderList,
  StreamList,
} from "../ops/schemas.js";
import { searchNotifications } from "../ops/search.js";
import { listStreams } from "../ops/streams.js";
import { parseUserIdParam } from "../preferences/schemas.js";
import { type Contract, contract, Timestamp } from "./contract.js";
import { NotificationDetail, NotificationView } from "./notifications.js";

const ops = (route: Omit<Contract, "tag" | "scope">) => contract({ ...route, tag: "Operations", scope: "operator" });

const ContactChangeList = v.object({
  data: v.array(
    v.object({
      fields: v.array(v.picklist(["email", "phone"])),
      client_id: v.string(),
      key_id: v.string(),
      changed_at: Timestamp,
    }),
  ),
});

const WithClient = { client_id: v.pipe(v.string(), v.metadata({ description: "The client that sent it" })) };

/**
 * The operator's routes, scope `operator` (the deployment's scope, which also manages every
 * client's keys and reads the dead letters): they read and act across clients, unlike the client
 * routes they mirror, and show whose each thing is.
 */
export function mountOps(v1: Hono<AuthEnv>, deps: Pick<IngestDeps, "database" | "bus">): void {
  v1.get(
    "/ops/notifications",
    ops({
      summary: "Find notifications across clients",
      description:
        "Every criterion given must match; at least one of notification_id, user_id, idempotency_key is required. idempotency_key needs client_id (a key is unique per client): it is found through the 24 h idempotency guard, and with user_id too through the notification's own key at any age. Newest first; limit 50 by default, larger values clamped to 200. Each as GET /notifications/{id} shows it without the timeline, plus client_id.",
      query: OpsNotificationsQuery,
      responses: {
        200: {
          description: "The notifications found (none: an empty list)",
          schema: v.object({ data: v.array(v.object({ ...NotificationView.entries, ...WithClient })) }),
        },
      },
      problems: ["validation_failed"],
    }),
    async (c) => c.json(await searchNotifications(deps.database, validate(OpsNotificationsQuery, c.req.query()))),
  );

  v1.get(
    "/ops/notifications/:id",
    ops({
      summary: "Read any client's notification",
      description: "Exactly what its client reads at GET /notifications/{id}, timeline included, plus client_id.",
      responses: {
        200: {
          description: "The notification, its channels and its history",
          schema: v.object({ ...NotificationDetail.entries, ...WithClient }),
        },
      },
      problems: ["not_found"],
    }),
    async (c) => c.json(await getAnyNotification(deps.database, c.req.param("id"))),
  );

  v1.get(
    "/ops/users/:id/contact-changes",
    ops({
      summary: "Who changed a user's addresses",
      description:
        "The user's recorded address changes, newest first (the last 100): which fields changed (email, phone), and the key and client that changed them. The addresses themselves are not kept here.",
      responses: { 200: { description: "The changes", schema: ContactChangeList } },
      problems: ["validation_failed"],
    }),
    async (c) => {
      const userId = parseUserIdParam(c.req.param("id"));
      try {
        return c.json({ data: await listContactChanges(deps.database, userId, 100) });
      } catch (error) {
        throw toAppError(error);
      }
    },
  );

  v1.get(
    "/ops/streams",
    ops({
      summary: "Streams and consumers",
      description:
        "This deployment's JetStream streams (its NATS namespace), sorted by name, with their messages and each consumer's backlog: num_pending (not delivered yet), num_ack_pending (in hand, unacknowledged), num_redelivered, num_waiting (pull requests waiting). Read from the server now.",
      responses: { 200: { description: "The streams", schema: StreamList } },
      problems: [],
    }),
    async (c) => c.json(await listStreams(deps.bus)),
  );

  v1.get(
    "/ops/providers",
    ops({
      summary: "Providers: breakers and rates",
      description:
        "Each provider a live worker process reports (each writes its report every WORKER_REPORT_INTERVAL_MS to NATS KV notify_workers, kept 30 s): the breaker over all of them (open if any reports it open, else half_open if any does, else closed) with the last shared decision (who opened or closed it for all, and when), each process's own breaker, bucket rates and sends waiting for a token, and the tokens the shared buckets hold now. A provider no live worker reports is not listed.",
      responses: { 200: { description: "The providers, by name", schema: ProviderList } },
      problems: [],
    }),
    async (c) => c.json(await listProviders(deps.bus)),
  );

  v1.get(
    "/ops/broadcasts",
    ops({
      summary: "List every client's broadcasts",
      description:
        "Newest first, each with its progress and client_id; offset pagination: page_size 50 by default, clamped to 200; total_count counts the broadcasts of the status asked (all without one).",
      query: OpsBroadcastsQuery,
      responses: { 200: { description: "One page", schema: OpsBroadcastPage } },
      problems: ["validation_failed"],
    }),
    async (c) => c.json(await listAnyBroadcasts(deps.database, validate(OpsBroadcastsQuery, c.req.query()))),
  );

  const actions = {
    pause:
      "Status paused: the batch being expanded finishes, no further one is taken. A broadcast not expanding is left as it is.",
    resume: "Status expanding again, from where it stopped. A broadcast not paused is left as it is.",
    cancel:
      "Stops the expansion for good (from expanding or paused); recipients already expanded keep their notifications. A finished broadcast is left as it is.",
  } as const;
  for (const [action, description] of Object.entries(actions) as Array<[keyof typeof actions, string]>) {
    v1.post(
      `/ops/broadcasts/:id/${action}`,
      ops({
        summary: `${action[0]?.toUpperCase()}${action.slice(1)} any client's broadcast`,
        description: `${description} Answers its progress whatever it changed.`,
        responses: { 200: { description: "Its progress", schema: OpsBroadcastView } },
        problems: ["not_found"],
      }),
      async (c) => {
        const view = await changeAnyBroadcast(deps.database, c.req.param("id"), action);
        c.get("log").info(
          { broadcast_id: view.broadcast_id, client_id: view.client_id, status: view.status, action },
          "operator changed a broadcast",
        );
        return c.json(view);
      },
    );
  }
}
