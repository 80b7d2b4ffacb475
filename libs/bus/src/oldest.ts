import type { JetStreamManager, MsgRequest } from "@nats-io/jetstream";

/**
 * When the oldest message still stored on `subject` was published, or null when none is. On a
 * work-queue stream a message stays until it is acknowledged, so a message published before
 * this time may still be waiting or in a consumer's hands; one published after it is gone.
 */
export async function oldestOnSubject(
  bus: { jsm: JetStreamManager },
  stream: string,
  subject: string,
): Promise<Date | null> {
  // The server's message get takes next_by_subj; the client types it only for direct gets,
  // which would need allow_direct on every stream.
  const request = { next_by_subj: subject, seq: 1 } as unknown as MsgRequest;
  const message = await bus.jsm.streams.getMessage(stream, request);
  return message === null ? null : new Date(message.time);
}
