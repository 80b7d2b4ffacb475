import { Agent as HttpAgent } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import type { Socket } from "node:net";

/** How long a connection is kept idle between sends, as Node's own agent keeps one. */
export const IDLE_MS = 5_000;

/**
 * The SendGrid provider's own connections. @sendgrid/client's axios is shared with every other
 * package that loads it, and one that changes axios's default agents changes ours (plivo does,
 * on load: 20 idle sockets kept, 100 at most, so with more sends in flight a connection is closed
 * after its answer and a new one opened for the next send); Node's global agent is not taken
 * either, as anything in the process may change it.
 *
 * A connection being made (name lookup, TCP, TLS) may take as long as the send's deadline,
 * `connectMs`: the agent's timeout bounds that phase alone, the request's own starting once
 * connected. Idle connections are kept IDLE_MS (less when the server announces less), with no cap
 * on their number, which the sends in flight already bound. axios sets TCP keep-alive to 60 s on
 * each request's socket; the agents set the same when they take one back, where a different
 * value would cost two system calls a send.
 */
export function sendAgents(connectMs: number): { httpAgent: HttpAgent; httpsAgent: HttpsAgent } {
  const options = {
    keepAlive: true,
    keepAliveMsecs: 60_000,
    scheduling: "lifo",
    timeout: connectMs,
    maxFreeSockets: Number.POSITIVE_INFINITY,
  } as const;
  return { httpAgent: idleFor(new HttpAgent(options)), httpsAgent: idleFor(new HttpsAgent(options)) };
}

/** An agent whose idle connections close after IDLE_MS, whatever its timeout for connecting. */
function idleFor<A extends HttpAgent>(agent: A): A {
  const keep = agent.keepSocketAlive.bind(agent);
  agent.keepSocketAlive = (socket: Socket) => {
    const kept = keep(socket);
    if (socket.timeout === undefined || socket.timeout === 0 || socket.timeout > IDLE_MS) socket.setTimeout(IDLE_MS);
    return kept;
  };
  return agent;
}
