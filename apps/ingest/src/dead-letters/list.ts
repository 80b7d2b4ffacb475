import type { Bus } from "@notify/bus";
import type { DeadLetterListRequest, DeadLetterPage, DeadLetterShown } from "@notify/core";
import { askProcessor, PROCESSOR_TIMEOUT_MS } from "./ask.js";
import type { ListDeadLettersQuery } from "./schemas.js";

/**
 * GET /api/v1/dead-letters: the NOTIFY_DLQ stream is the record of dead letters, newest first.
 * A processor reads it (notify.ops.dlq.list: libs/ops deadLetterPage, what `notify dlq list`
 * reads, nothing changed on the server) and answers the page as this route answers it.
 */
export function listDeadLetters(
  deps: { bus: Bus; deadLetterTimeoutMs?: number },
  query: ListDeadLettersQuery,
): Promise<DeadLetterPage> {
  const request: DeadLetterListRequest = {
    page: query.page,
    page_size: query.page_size,
    ...(query.channel ? { channel: query.channel } : {}),
    ...(query.class ? { class: query.class } : {}),
    ...(query.since ? { since: query.since } : {}),
    ...(query.until ? { until: query.until } : {}),
    ...(query.notification_id ? { notification_id: query.notification_id } : {}),
  };
  return askProcessor<DeadLetterPage>(
    deps.bus,
    deps.bus.subjects.opsDlqList,
    request,
    deps.deadLetterTimeoutMs ?? PROCESSOR_TIMEOUT_MS,
  );
}

/**
 * GET /api/v1/dead-letters/{seq}: the letter in full, its channel's status now and its status
 * history, as a processor reads them (notify.ops.dlq.show); a sequence holding none is its 404.
 */
export function showLetter(deps: { bus: Bus; deadLetterTimeoutMs?: number }, seq: number): Promise<DeadLetterShown> {
  return askProcessor<DeadLetterShown>(
    deps.bus,
    deps.bus.subjects.opsDlqShow,
    { seq },
    deps.deadLetterTimeoutMs ?? PROCESSOR_TIMEOUT_MS,
  );
}
