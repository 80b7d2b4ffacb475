// What the bus changes in the NATS client, in one place: three costs per message that do no work.
// All keep the client's behaviour; all belong upstream. They reach into its internals as
// nats.js 3.3 has them: another version is left as it is (and this module's tests fail, the
// signal to read its internals again).
import type { Socket } from "node:net";
import { RequestOne, TE } from "@nats-io/nats-core/internal";
import { NodeTransport, VERSION } from "@nats-io/transport-node/lib/node_transport.js";

const readAgainst = VERSION.startsWith("3.3.");

/**
 * Writes to the NATS server once per turn of the event loop instead of once per microtask
 * turn. The client flushes what it has buffered at the end of each microtask turn, and a busy
 * app resumes its handlers in many turns of one event-loop iteration (one per Postgres answer,
 * per provider answer, per NATS read): each its own write, a system call here and a read for
 * the server. Corked until the iteration's check phase, they leave as one writev, as
 * postgres.js does with its own writes. Order is kept (one socket, one queue).
 */
const uncork = (socket: Socket) => socket.uncork();

const send = NodeTransport.prototype.send;
const coalescingSend = function coalescingSend(this: NodeTransport, frame: Uint8Array): void {
  const socket = this.socket;
  // Corked only here, once an iteration: a corked socket already has its uncork on the way.
  if (socket !== undefined && socket.writableCorked === 0 && !socket.destroyed) {
    socket.cork();
    setImmediate(uncork, socket);
  }
  send.call(this, frame);
};

// Closing destroys the socket at once: what this iteration wrote leaves first, as it had left
// before (a JetStream ack or a reply written in the turn of a close or a drain's end). The
// uncork still on its way then finds nothing corked, and does nothing.
type Closing = { _closed(err?: Error, internal?: boolean): Promise<void>; discard(): void; socket?: Socket };
const transport = NodeTransport.prototype as unknown as Closing;
const closed = transport._closed;
const discard = transport.discard;
function releaseThenClose(this: Closing, err?: Error, internal?: boolean) {
  if (this.socket?.writableCorked) this.socket.uncork();
  return closed.call(this, err, internal);
}
function releaseThenDiscard(this: Closing) {
  if (this.socket?.writableCorked) this.socket.uncork();
  discard.call(this);
}

/**
 * No Error for a request that was answered. The client ends every request with cancel(), which
 * rejects the request's promise with a new RequestError("cancelled"), stack trace and all, even
 * when the promise was settled by the answer and the rejection changes nothing: one Error per
 * JetStream publish ack, KV get, put and create. A request cancelled before its answer is
 * rejected as the client rejects it.
 */
const ANSWERED = Symbol("answered");
type Answerable = RequestOne & { [ANSWERED]?: true };
const resolver = RequestOne.prototype.resolver;
const cancel = RequestOne.prototype.cancel;
const settle = function settle(this: Answerable, err: Error | null, msg: unknown): void {
  this[ANSWERED] = true;
  resolver.call(this, err, msg as never);
};
const cancelUnanswered = function cancelUnanswered(this: Answerable, err?: Error): void {
  if (err !== undefined || this[ANSWERED] !== true) {
    cancel.call(this, err);
    return;
  }
  this.timer?.cancel();
  this.mux.cancel(this);
};
/**
 * UTF-8 from Buffer's pool instead of a TextEncoder. The client encodes every command line, every
 * header block and every string payload through one shared TextEncoder, whose `encode` makes a
 * new ArrayBuffer each time, where `Buffer.from` cuts small strings from a shared slab: a
 * TextEncoder leaves the garbage collector one backing store per encode to free, and fan-out
 * encodes one message per recipient. The bytes are the same, a lone surrogate included (U+FFFD
 * either way); a Buffer is a Uint8Array, and the TCP transport (the only one the bus connects
 * with) copies or writes what it is given, never writing into it or reading its `.buffer`.
 * (nats.js's WebSocket transport sends a frame's `.buffer`, which for a pooled Buffer is its
 * whole slab: it must not be used in this process.)
 */
const utf8 = (input = ""): Uint8Array => Buffer.from(`${input}`, "utf8");

/** A value as the JSON bytes the bus publishes and stores (messages, KV values). */
export const jsonBytes = (value: unknown): Uint8Array => Buffer.from(JSON.stringify(value) ?? "", "utf8");

if (readAgainst) {
  (TE as { encode(input?: string): Uint8Array }).encode = utf8;
  NodeTransport.prototype.send = coalescingSend;
  transport._closed = releaseThenClose;
  transport.discard = releaseThenDiscard;
  RequestOne.prototype.resolver = settle;
  RequestOne.prototype.cancel = cancelUnanswered;
}
