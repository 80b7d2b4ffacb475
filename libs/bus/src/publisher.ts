import { JetStreamApiError } from "@nats-io/jetstream";
import { createInbox, headers, type NatsConnection, type Subscription, TimeoutError } from "@nats-io/transport-node";
import { injectHeaders } from "@notify/telemetry";

export interface PubAck {
  seq: number;
  duplicate: boolean;
}

/**
 * A JetStream publish whose outcome is unknown (no ack in time): it may still have landed. It is
 * the client's own TimeoutError, so whoever classifies errors (libs/http) knows it as NATS's.
 */
export class PublishTimeoutError extends TimeoutError {
  constructor(message: string) {
    super();
    this.message = message;
  }
}

/**
 * JetStream refused the message, or nothing captures the subject: it was not stored. `status`
 * is the server's HTTP-like code (503: no stream captures the subject, or JetStream is
 * unavailable); the `cause` carries the answer as the client's JetStreamApiError.
 */
export class PublishRejectedError extends Error {
  override name = "PublishRejectedError";
  readonly status: number;
  /** JetStream's error code: 10077 when the stream would not store it (a limit reached). */
  readonly errCode: number;

  constructor(status: number, description: string, errCode = 0) {
    super(`${status} ${description}`, {
      cause: new JetStreamApiError({ code: status, err_code: errCode, description }),
    });
    this.status = status;
    this.errCode = errCode;
  }
}

/**
 * JetStream publishes with acknowledgements, pipelined over one wildcard inbox subscription.
 * The client's own `js.publish` sets up a request per message (an inbox entry, a timer and two
 * error objects for their stack traces); ingest and fan-out publish thousands a second, so the
 * acks are matched here by a counter in the reply subject and timed out by one sweep.
 */
export function createPublisher(nc: NatsConnection, timeoutMs: number, inboxPrefix?: string) {
  const prefix = createInbox(inboxPrefix);
  const pending = new Map<string, { resolve(ack: PubAck): void; reject(error: Error): void; deadline: number }>();
  const decoder = new TextDecoder();
  let counter = 0;

  const sub: Subscription = nc.subscribe(`${prefix}.*`, {
    callback: (error, msg) => {
      if (error) return;
      const token = msg.subject.slice(prefix.length + 1);
      const waiter = pending.get(token);
      if (!waiter) return;
      pending.delete(token);
      if (msg.headers?.hasError) {
        // 503: no stream captures the subject (the server's "no responders").
        waiter.reject(new PublishRejectedError(msg.headers.code, msg.headers.description));
        return;
      }
      const body = JSON.parse(decoder.decode(msg.data)) as {
        seq?: number;
        duplicate?: boolean;
        error?: { code: number; err_code?: number; description: string };
      };
      if (body.error) {
        waiter.reject(new PublishRejectedError(body.error.code, body.error.description, body.error.err_code));
      } else {
        waiter.resolve({ seq: body.seq ?? 0, duplicate: body.duplicate === true });
      }
    },
  });

  // The sweep runs only while acks are awaited: an idle process is not woken for it.
  let sweep: ReturnType<typeof setInterval> | undefined;
  const sweepMs = Math.max(10, Math.min(250, timeoutMs / 4));
  const timeOut = () => {
    const now = Date.now();
    for (const [token, waiter] of pending) {
      if (waiter.deadline <= now) {
        pending.delete(token);
        waiter.reject(new PublishTimeoutError(`no JetStream ack within ${timeoutMs} ms`));
      }
    }
    if (pending.size === 0) {
      clearInterval(sweep);
      sweep = undefined;
    }
  };
  let closed = false;

  return {
    publish(subject: string, data: Uint8Array, msgId: string): Promise<PubAck> {
      // Closed, no ack could ever be heard: refused at once rather than left waiting forever.
      if (closed) return Promise.reject(new PublishTimeoutError("connection closing"));
      return new Promise<PubAck>((resolve, reject) => {
        const token = (counter++).toString(36);
        pending.set(token, { resolve, reject, deadline: Date.now() + timeoutMs });
        if (sweep === undefined && !closed) {
          sweep = setInterval(timeOut, sweepMs);
          sweep.unref();
        }
        const h = headers();
        h.set("Nats-Msg-Id", msgId);
        // The caller's trace context (traceparent, tracestate) travels with the message; nothing
        // is written when tracing is off.
        injectHeaders(h);
        try {
          nc.publish(subject, data, { reply: `${prefix}.${token}`, headers: h });
        } catch (error) {
          pending.delete(token);
          reject(error as Error);
        }
      });
    },
    close() {
      closed = true;
      clearInterval(sweep);
      sweep = undefined;
      sub.unsubscribe();
      for (const waiter of pending.values()) waiter.reject(new PublishTimeoutError("connection closing"));
      pending.clear();
    },
  };
}
