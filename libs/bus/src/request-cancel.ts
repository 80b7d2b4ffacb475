import { RequestOne } from "@nats-io/nats-core/internal";

/**
 * nats-core 3.3 ends every request with `cancel()`, also once it is answered, and `cancel()`
 * rejects the request's promise (then already settled, so to no effect) with a new
 * `RequestError("cancelled")`: an Error and its stack trace for every JetStream publish ack
 * and KV operation, 4.6% of the processor's CPU and 2.5% of the workers' under load. Here an
 * answered request's `cancel()` only stops its timer and leaves the mux, as the original does
 * before its rejection; a request cancelled before its answer (a timeout, a closed
 * connection) is rejected as before. Applied once, on import; `requestCancelPatched` says
 * whether the library still has the shape this expects (a test holds it to that).
 */
interface RequestInternals {
  timer?: { cancel(): void };
  mux: { cancel(request: unknown): void };
  resolver(err: Error | null, msg: unknown): void;
  cancel(err?: Error): void;
}

const answered = new WeakSet<object>();

function patch(): boolean {
  const proto = RequestOne.prototype as unknown as RequestInternals;
  if (typeof proto.resolver !== "function" || typeof proto.cancel !== "function") return false;
  const { resolver, cancel } = proto;
  proto.resolver = function (this: RequestInternals, err, msg) {
    answered.add(this);
    resolver.call(this, err, msg);
  };
  proto.cancel = function (this: RequestInternals, err) {
    if (err !== undefined || !answered.has(this)) return cancel.call(this, err);
    this.timer?.cancel();
    this.mux.cancel(this);
  };
  return true;
}

export const requestCancelPatched = patch();
