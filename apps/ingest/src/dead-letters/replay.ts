import type { Bus } from "@notify/bus";
import type { ReplayAnswer, ReplayMessage, ReplayRequest, RequestedBy } from "@notify/core";
import { askProcessor, PROCESSOR_TIMEOUT_MS } from "./ask.js";

/**
 * POST /api/v1/dead-letters/replay: ingest does not replay itself (it holds neither the send
 * guard nor the work subjects); it asks a processor on notify.ops.replay, with the key that
 * asked (`requested_by`, which the processor logs the replay with), and answers what that
 * answered: the replay, or its error as a problem.
 */
export function replayLetters(
  deps: { bus: Bus; replayTimeoutMs?: number },
  request: ReplayRequest,
  requestedBy: RequestedBy,
): Promise<ReplayAnswer> {
  const message: ReplayMessage = { ...request, requested_by: requestedBy };
  return askProcessor<ReplayAnswer>(
    deps.bus,
    deps.bus.subjects.opsReplay,
    message,
    deps.replayTimeoutMs ?? PROCESSOR_TIMEOUT_MS,
  );
}
