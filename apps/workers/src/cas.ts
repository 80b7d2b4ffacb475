import { JetStreamApiCodes, JetStreamApiError } from "@nats-io/jetstream";

/** A KV compare-and-set lost the race: someone wrote the key since it was read. */
export const isWrongLastSequence = (error: unknown): boolean =>
  error instanceof JetStreamApiError &&
  (error.code === JetStreamApiCodes.StreamWrongLastSequence ||
    error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown);
