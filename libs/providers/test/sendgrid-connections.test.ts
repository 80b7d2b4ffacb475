import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setImmediate as nextTurn } from "node:timers/promises";
import t from "tap";
import { createSendgridProvider } from "../src/index.js";
import { SendgridHttpClient } from "../src/sendgrid/http-client.js";

// The SendGrid provider's connections are its own, not axios's, which other packages share:
// plivo replaces axios's default agents when it is loaded (20 idle sockets kept, 100 at most),
// and through those, with more sends in flight than that, each send's connection would close
// after its answer and sends beyond 100 would queue inside the process. plivo is loaded here to
// show that nothing another package does to shared HTTP state reaches the provider.
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

t.test("an idle connection is closed after the client's idle time, though the server keeps it longer", async (t) => {
  const server = await mailServer();
  const client = new SendgridHttpClient({ connectMs: 8000, timeoutMs: 8000, idleMs: 300 });
  t.teardown(() => client.close());
  client.setApiKey("SG.test");
  client.setDefaultRequest("baseUrl", server.url);
  const [response] = await client.request({ method: "POST", url: "/v3/mail/send", body: {} });
  t.equal(response.statusCode, 202);
  t.equal(server.connections().open, 1, "kept for the next send");
  await new Promise((resolve) => setTimeout(resolve, 1000));
  t.equal(server.connections().open, 0, "closed once idle for the client's time (the server keeps it 65 s)");
  t.equal(server.connections().accepted, 1);
});
