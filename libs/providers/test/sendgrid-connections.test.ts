import { once } from "node:events";
import { createServer, type IncomingMessage, request, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setImmediate as nextTurn } from "node:timers/promises";
import t from "tap";
import { createSendgridProvider } from "../src/index.js";
import { IDLE_MS, sendAgents } from "../src/sendgrid/agents.js";

// The SendGrid provider's connections are its own. @sendgrid/client sends through axios, which
// other packages share, and plivo replaces axios's default agents when it is loaded (20 idle
// sockets kept, 100 at most): with more sends in flight than that, each send's connection was
// closed after its answer and a new one opened, and sends beyond 100 queued inside the process.
await import("plivo");

interface MailServer {
  url: string;
  /** TCP connections accepted so far, and those open now. */
  connections: () => { accepted: number; open: number };
  /** Most requests waiting for their answer at once. */
  mostInFlight: () => number;
}

/**
 * Answers Mail Send as SendGrid does (202, an X-Message-Id). With `holdUntil`, answers nothing
 * until that many requests wait at once (or 3 s pass), then answers them all.
 */
async function mailServer(holdUntil = 0): Promise<MailServer> {
  let accepted = 0;
  let open = 0;
  let inFlight = 0;
  let most = 0;
  let held: ServerResponse[] = [];
  const answer = (res: ServerResponse) => res.writeHead(202, { "x-message-id": `m${accepted}` }).end();
  const release = () => {
    for (const res of held) answer(res);
    held = [];
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    inFlight++;
    most = Math.max(most, inFlight);
    res.once("finish", () => inFlight--);
    req.resume();
    req.once("end", () => {
      if (holdUntil === 0) return answer(res);
      held.push(res);
      if (held.length >= holdUntil) release();
    });
  });
  server.keepAliveTimeout = 65_000;
  server.on("connection", (socket) => {
    accepted++;
    open++;
    socket.once("close", () => open--);
  });
  const timer = holdUntil === 0 ? undefined : setInterval(release, 3000);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  t.teardown(() => {
    clearInterval(timer);
    server.closeAllConnections();
    server.close();
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => ({ accepted, open }),
    mostInFlight: () => most,
  };
}

const message = (i: number) => ({
  notificationId: `n${i}`,
  channel: "email" as const,
  to: `user${i}@example.com`,
  subject: "Hello",
  body: "<p>Hello</p>",
  category: "welcome",
  priority: "transactional" as const,
  deliverBy: null,
});

const providerFor = (url: string) =>
  createSendgridProvider({ apiKey: "SG.test", baseUrl: url, from: "n@example.com", timeoutMs: 10_000 });

t.test("each send in flight keeps its connection from one send to the next", async (t) => {
  const lanes = 40;
  // The answers come together, as from a busy provider, and each lane's next send follows its
  // answer after some work of its own (here a turn of the event loop), as a worker's does: all
  // the connections are idle at once between two sends.
  const server = await mailServer(lanes);
  const provider = providerFor(server.url);
  t.teardown(() => provider.close?.());
  const outcomes = await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      const seen: string[] = [];
      for (let i = 0; i < 5; i++) {
        seen.push((await provider.send(message(lane * 5 + i))).outcome);
        await nextTurn();
      }
      return seen;
    }),
  );
  t.same(new Set(outcomes.flat()), new Set(["accepted"]));
  t.ok(
    server.connections().accepted <= lanes,
    `${server.connections().accepted} connections for ${lanes} sends in flight`,
  );
});

t.test("more than 100 sends in flight all reach SendGrid at once", async (t) => {
  const sends = 120;
  const server = await mailServer(sends);
  const provider = providerFor(server.url);
  t.teardown(() => provider.close?.());
  const outcomes = await Promise.all(Array.from({ length: sends }, (_, i) => provider.send(message(i))));
  t.same(new Set(outcomes.map((o) => o.outcome)), new Set(["accepted"]));
  t.equal(server.mostInFlight(), sends, "none waited inside the process for a connection");
});

t.test("close() closes the idle connections", async (t) => {
  const server = await mailServer();
  const provider = providerFor(server.url);
  await Promise.all(Array.from({ length: 4 }, (_, i) => provider.send(message(i))));
  t.equal(server.connections().open, 4, "kept open between sends");
  await provider.close?.();
  for (let i = 0; i < 100 && server.connections().open > 0; i++) await nextTurn();
  t.equal(server.connections().open, 0);
});

t.test("making a connection may take the send's deadline; an idle one is kept 5 s", async (t) => {
  const server = await mailServer();
  const { httpAgent } = sendAgents(8000);
  t.teardown(() => httpAgent.destroy());
  // The agent's timeout bounds the connecting alone (the request's own starts once connected).
  t.equal((httpAgent as unknown as { options: { timeout?: number } }).options.timeout, 8000);
  await new Promise((resolve, reject) => {
    const req = request(`${server.url}/v3/mail/send`, { method: "POST", agent: httpAgent }, (res) => {
      res.resume();
      res.once("end", resolve);
    });
    req.once("error", reject);
    req.end("{}");
  });
  for (let i = 0; i < 10 && Object.keys(httpAgent.freeSockets).length === 0; i++) await nextTurn();
  const idle = Object.values(httpAgent.freeSockets).flat();
  t.equal(idle.length, 1, "kept for the next send");
  t.equal(idle[0]?.timeout, IDLE_MS, "closed after 5 s idle, though the server keeps it 65 s");
});
