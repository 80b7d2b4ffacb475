import type { Socket } from "node:net";
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
