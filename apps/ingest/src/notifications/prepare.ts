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
} from "@notify/core";
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
  deps: { bus: Bus; templates: (id: string) => MaybePromise<TemplateInfo | null>; now?: () => number },
  input: CreateInput,
): MaybePromise<Prepared> {
  const found = deps.templates(input.request.template_id);
  return found instanceof Promise
    ? found.then(
        (template) => prepared(deps, input, template),
        (error: unknown) => {
          throw toAppError(error);
        },
      )
    : prepared(deps, input, found);
}

function prepared(deps: { bus: Bus; now?: () => number }, input: CreateInput, found: TemplateInfo | null): Prepared {
  const { request } = input;
  const template = checkTemplate(found, request.template_id, request.data);
  const now = deps.now?.() ?? Date.now();
  const { deliverBy, refusal } = deadlineOf(request, template, now);
  if (request.fallback !== undefined) {
    const fields = fallbackProblems(request.channels, request.fallback);
    if (fields.length > 0)
      throw new AppError("validation_failed", fields.map((f) => `${f.field}: ${f.message}`).join("; "), { fields });
  }
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
    },
    requestHash: requestHash(request),
    partition: partitionOf(request.user_id, deps.bus.naming.partitions),
    fallback: request.fallback ?? null,
    ...(refusal === undefined ? {} : { refusal }),
  };
}

/**
 * The notification's deadline as an ISO string: the request's own deliver_by, else the
 * template's time to live from now; null for neither. One too far out is a 400; one that has
 * passed is a 400 too, unless the request replays one already accepted (`refusal`).
 */
function deadlineOf(
  request: NotificationRequest,
  template: TemplateInfo,
  now: number,
): { deliverBy: string | null; refusal?: AppError } {
  if (request.deliver_by === undefined) {
    const ttl = template.ttlSeconds ?? null;
    return { deliverBy: ttl === null ? null : new Date(now + ttl * 1000).toISOString() };
  }
  const deadline = parseRfc3339(request.deliver_by) as Date; // the schema checked its syntax
  const problem = deadlineProblem(deadline, new Date(now));
  if (problem === null) return { deliverBy: deadline.toISOString() };
  const error = new AppError("validation_failed", `deliver_by: ${problem}`, {
    fields: [{ field: "deliver_by", message: problem }],
  });
  if (deadline.getTime() > now) throw error;
  return { deliverBy: deadline.toISOString(), refusal: error };
}
