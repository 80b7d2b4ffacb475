// What the bus changes in the NATS client (nats.js 3.3), in one place: two costs per message
// that do no work. Both keep the client's behaviour; both belong upstream.
import type { Socket } from "node:net";
import { RequestOne } from "@nats-io/nats-core/internal";
import { NodeTransport } from "@nats-io/transport-node/lib/node_transport.js";

/**
 * Writes to the NATS server once per turn of the event loop instead of once per microtask
 * turn. The client flushes what it has buffered at the end of each microtask turn, and a busy
 * app resumes its handlers in many turns of one event-loop iteration (one per Postgres answer,
 * per provider answer, per NATS read): each its own write, a system call here and a read for
 * the server. Corked until the iteration's check phase, they leave as one writev, as
 * postgres.js does with its own writes. Order is kept (one socket, one queue).
 */
const corked = new WeakSet<Socket>();

const uncork = (socket: Socket) => {
  corked.delete(socket);
  socket.uncork();
};

const send = NodeTransport.prototype.send;
NodeTransport.prototype.send = function coalescingSend(this: NodeTransport, frame: Uint8Array): void {
  const socket = this.socket;
  if (socket !== undefined && !corked.has(socket) && !socket.destroyed) {
    corked.add(socket);
    socket.cork();
    setImmediate(uncork, socket);
  }
  send.call(this, frame);
};

/**
 * No Error for a request that was answered. The client ends every request with cancel(), which
 * rejects the request's promise with a new RequestError("cancelled"), stack trace and all, even
 * when the promise was settled by the answer and the rejection changes nothing: one Error per
 * JetStream publish ack, KV get, put and create (2-5% of the processor's and workers' CPU). A
 * request cancelled before its answer is rejected as before.
 */
const ANSWERED = Symbol("answered");
type Answerable = RequestOne & { [ANSWERED]?: true };
const resolver = RequestOne.prototype.resolver;
RequestOne.prototype.resolver = function settle(this: Answerable, err: Error | null, msg: unknown): void {
  this[ANSWERED] = true;
  resolver.call(this, err, msg as never);
};
const cancel = RequestOne.prototype.cancel;
RequestOne.prototype.cancel = function cancelUnanswered(this: Answerable, err?: Error): void {
  if (err !== undefined || this[ANSWERED] !== true) {
    cancel.call(this, err);
    return;
  }
  this.timer?.cancel();
  this.mux.cancel(this);
};
