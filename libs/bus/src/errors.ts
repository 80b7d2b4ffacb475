import { JetStreamApiCodes, JetStreamApiError } from "@nats-io/jetstream";
import {
  ClosedConnectionError,
  ConnectionError,
  DrainingConnectionError,
  NoRespondersError,
  RequestError,
  TimeoutError,
} from "@nats-io/transport-node";
import { PublishRejectedError } from "./publisher.js";

/** JetStream's code for a consumer refused because the stream (or account) holds as many as it may. */
const MAX_CONSUMERS = 10026;

/** JetStream's codes for a message a stream would not store: a limit reached (discard new), or no storage left. */
const STORE_REFUSED = new Set([10077, 10047]);

/**
 * A publish the stream refused because it is full (its message or byte limit reached with
 * discard new, or the server's storage exhausted): nothing was stored; retry once it drains.
 */
export const isStreamFull = (error: unknown): boolean =>
  error instanceof PublishRejectedError && STORE_REFUSED.has(error.errCode);

/** A KV compare-and-set lost the race: someone wrote the key since it was read. */
export const isWrongLastSequence = (error: unknown): boolean =>
  error instanceof JetStreamApiError &&
  (error.code === JetStreamApiCodes.StreamWrongLastSequence ||
    error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown);

/**
 * What one error object (its cause aside) says about NATS: "outage" when the client or
 * JetStream says NATS is out of reach, overloaded or timed out, so a retry may succeed; "bug"
 * when JetStream answered with something a retry does not fix (stream not found, bad request);
 * "unknown" when it is not NATS's error, or only its cause can tell. By class and stable code
 * only, never by message text, so callers (libs/http's dependency classification) need not know
 * the client's error classes.
 */
export function judgeNatsError(error: object): "outage" | "bug" | "unknown" {
  if (
    error instanceof ConnectionError ||
    error instanceof ClosedConnectionError ||
    error instanceof DrainingConnectionError ||
    error instanceof TimeoutError ||
    error instanceof NoRespondersError
  ) {
    return "outage";
  }
  // Without a cause a RequestError is the client's own: "connection disconnected", "connection
  // closed", "cancelled". With one, the cause says what went wrong (no responders, a permission).
  if (error instanceof RequestError) return error.cause === undefined ? "outage" : "unknown";
  // JetStream answered: 503 is its "no responders" / "temporarily unavailable", and a stream's
  // consumer limit reached (readers each hold one a moment) passes as they finish; anything else
  // (stream not found, bad request) is a configuration or a bug that a retry does not fix.
  if (error instanceof JetStreamApiError) {
    return error.status === 503 || error.code === MAX_CONSUMERS ? "outage" : "bug";
  }
  return "unknown";
}
