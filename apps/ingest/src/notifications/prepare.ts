import type { Bus } from "@notify/bus";
import {
  AppError,
  deadlineProblem,
  type FallbackStep,
  fallbackProblems,
  type LaneMessage,
  type MaybePromise,
  type NotificationRequest,
  newId,
  parseRfc3339,
  partitionOf,
  resolveSendAtLocal,
  sendAtProblem,
  userZone,
} from "@notify/core";
import { type Database, readUserZones } from "@notify/db";
import { toAppError } from "@notify/http";
import { requestHash } from "./canonical-json.js";
import { checkTemplate, type TemplateInfo } from "./templates.js";

export interface CreateInput {
  clientId: string;
  idempotencyKey: string;
  request: NotificationRequest;
}

/** A request checked and turned into what the group commit stores and publishes. */
export interface Prepared {
  input: CreateInput;
  /** Its `created_at` is filled in once the row is committed. */
  message: LaneMessage;
  requestHash: string;
  partition: number;
  /** The channel fallback chain, stored with the notification; null: none. */
  fallback: FallbackStep[] | null;
  /**
   * Why it may not be stored as a new notification, though it may be the replay of one: its
   * deadline has passed. A request with an Idempotency-Key already claimed is answered from the
   * first (a client retrying after the deadline hears what became of its request); otherwise
   * this is the answer.
   */
  refusal?: AppError;
}

/**
 * Checks a request before it joins a batch: its template exists and its data has every declared
 * parameter (400), and NATS is connected (503 at once rather than a row left for the sweep).
 * Gives the notification its id, pins the template's current version and picks the lane
 * partition from the user id.
 */
export function prepareNotification(
  deps: {
    bus: Bus;
    templates: (id: string) => MaybePromise<TemplateInfo | null>;
    /** The user's time zones, read only for a request with send_at_local. */
    database?: Database;
    now?: () => number;
  },
  input: CreateInput,
): MaybePromise<Prepared> {
  const found = deps.templates(input.request.template_id);
  const local = input.request.send_at_local;
  if (local === undefined && !(found instanceof Promise)) return prepared(deps, input, found, null);
  return (async () => {
    try {
      const template = await found;
      if (local === undefined) return prepared(deps, input, template, null);
      if (input.request.send_at !== undefined)
        throw new AppError("validation_failed", "send_at and send_at_local: give one or the other", {
          fields: [{ field: "send_at_local", message: "not with send_at" }],
        });
      if (!deps.database) throw new Error("send_at_local needs the database to read the user's time zone");
      const zones = await readUserZones(deps.database, input.request.user_id);
      const zone = userZone(zones.timeZone, zones.quietHoursZone);
      return prepared(deps, input, template, resolveSendAtLocal(local, zone, new Date(deps.now?.() ?? Date.now())));
    } catch (error) {
      throw toAppError(error);
    }
  })();
}

/** `localSendAt`: send_at_local resolved in the user's zone; null without one. */
function prepared(
  deps: { bus: Bus; now?: () => number },
  input: CreateInput,
  found: TemplateInfo | null,
  localSendAt: Date | null,
): Prepared {
  const { request } = input;
  const template = checkTemplate(found, request.template_id, request.data);
  const now = deps.now?.() ?? Date.now();
  const sendAt = localSendAt ?? (request.send_at === undefined ? null : (parseRfc3339(request.send_at) as Date));
  const { deliverBy, refusal } = deadlineOf(request, template, now, sendAt);
  if (request.fallback !== undefined) {
    const fields = fallbackProblems(request.channels, request.fallback);
    if (fields.length > 0)
      throw new AppError("validation_failed", fields.map((f) => `${f.field}: ${f.message}`).join("; "), { fields });
  }
  const combined = combinationProblems(request);
  if (combined.length > 0)
    throw new AppError("validation_failed", combined.map((f) => `${f.field}: ${f.message}`).join("; "), {
      fields: combined,
    });
  if (!deps.bus.isConnected()) {
    throw new AppError("dependency_unavailable", "nats is unavailable", { context: { retryAfterSeconds: 1 } });
  }
  return {
    input,
    message: {
      notification_id: newId(),
      client_id: input.clientId,
      user_id: request.user_id,
      category: request.category,
      template_id: request.template_id,
      template_version: template.version,
      priority: request.priority,
      channels: request.channels ?? null,
      data: request.data,
      created_at: "",
      ...(deliverBy === null ? {} : { deliver_by: deliverBy }),
      ...(sendAt === null ? {} : { send_at: sendAt.toISOString() }),
      ...(request.digest === undefined ? {} : { digest: request.digest }),
      ...(request.throttle === undefined ? {} : { throttle: request.throttle }),
    },
    requestHash: requestHash(request),
    partition: partitionOf(request.user_id, deps.bus.naming.partitions),
    fallback: request.fallback ?? null,
    ...(refusal === undefined ? {} : { refusal }),
  };
}

/**
 * The notification's deadline as an ISO string: the request's own deliver_by, else the
 * template's time to live from the time it is sent (`sendAt` when scheduled, else now); null for
 * neither. One too far out is a 400; one that has passed is a 400 too, unless the request
 * replays one already accepted (`refusal`). A send time after the deadline, or too far out, is a
 * 400 naming the field it came from.
 */
function deadlineOf(
  request: NotificationRequest,
  template: TemplateInfo,
  now: number,
  sendAt: Date | null,
): { deliverBy: string | null; refusal?: AppError } {
  const deadline = request.deliver_by === undefined ? null : (parseRfc3339(request.deliver_by) as Date); // the schema checked its syntax
  if (sendAt !== null) {
    const problem = sendAtProblem(sendAt, deadline, new Date(now));
    const field = request.send_at_local === undefined ? "send_at" : "send_at_local";
    if (problem !== null)
      throw new AppError("validation_failed", `${field}: ${problem}`, { fields: [{ field, message: problem }] });
  }
  if (deadline === null) {
    const ttl = template.ttlSeconds ?? null;
    const from = Math.max(now, sendAt?.getTime() ?? now);
    return { deliverBy: ttl === null ? null : new Date(from + ttl * 1000).toISOString() };
  }
  const problem = deadlineProblem(deadline, new Date(now));
  if (problem === null) return { deliverBy: deadline.toISOString() };
  const error = new AppError("validation_failed", `deliver_by: ${problem}`, {
    fields: [{ field: "deliver_by", message: problem }],
  });
  if (deadline.getTime() > now) throw error;
  return { deliverBy: deadline.toISOString(), refusal: error };
}

/**
 * Fields that cannot go together: a digest is sent as one notification of its own, so its items
 * take no fallback chain or send time of their own; a throttle that folds what is over its limit
 * into a digest needs the digest.
 */
function combinationProblems(request: NotificationRequest): Array<{ field: string; message: string }> {
  const problems: Array<{ field: string; message: string }> = [];
  if (request.digest !== undefined) {
    if (request.fallback !== undefined) problems.push({ field: "digest", message: "not with fallback" });
    if (request.send_at !== undefined || request.send_at_local !== undefined)
      problems.push({ field: "digest", message: "not with send_at or send_at_local" });
  }
  if (request.throttle?.over_limit === "digest" && request.digest === undefined)
    problems.push({ field: "throttle.over_limit", message: '"digest" needs the request\'s digest' });
  // A digest's items reach the user together, not one by one: a throttle counts notifications
  // sent alone, so with a digest it only decides which of them are (over_limit "digest").
  if (request.digest !== undefined && request.throttle !== undefined && request.throttle.over_limit !== "digest")
    problems.push({ field: "throttle", message: 'with a digest, only over_limit "digest"' });
  return problems;
}
