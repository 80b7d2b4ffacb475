import { execFileSync } from "node:child_process";
import { createECDH, randomBytes, randomUUID } from "node:crypto";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import t, { type Test } from "tap";
import webpush from "web-push";
import { createWebPushProvider, type OutboundMessage } from "../src/index.js";
import { MAX_PUSH_ANSWER_BYTES } from "../src/webpush/provider.js";

// What a push endpoint answers is read with a cap, and the request ends at the send's deadline:
// a push service (or anything a subscription points at) answering without end, with a huge
// body, slowly, or not at all costs a few KiB and the deadline, never the heap or a socket left
// reading in the background. Against a real HTTPS server speaking each of those.

/** A certificate for 127.0.0.1, made for this file (the provider trusts it as its `ca`). */
function certificate(): { key: string; cert: string } {
  const dir = mkdtempSync(join(tmpdir(), "notify-push-tls-"));
  try {
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=127.0.0.1",
        "-addext",
        "subjectAltName=IP:127.0.0.1",
        "-keyout",
        join(dir, "key.pem"),
        "-out",
        join(dir, "cert.pem"),
      ],
      { stdio: "ignore" },
    );
    return { key: readFileSync(join(dir, "key.pem"), "utf8"), cert: readFileSync(join(dir, "cert.pem"), "utf8") };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** What the service saw of one request's connection: bytes it wrote, and whether it closed. */
interface Seen {
  written: number;
  closed: boolean;
  whenClosed: Promise<void>;
}

const tls = certificate();
const seen = new Map<string, Seen>();
const CHUNK = Buffer.alloc(64 * 1024, "x");

/** Writes CHUNK after CHUNK for as long as the connection takes them, at the pace it takes them. */
async function endless(res: ServerResponse, record: Seen): Promise<void> {
  while (!record.closed) {
    record.written += CHUNK.length;
    if (!res.write(CHUNK))
      await new Promise((resolve) => {
        res.once("drain", resolve);
        void record.whenClosed.then(resolve);
      });
  }
}

const server = createServer({ key: tls.key, cert: tls.cert }, (req: IncomingMessage, res: ServerResponse) => {
  const id = req.url?.split("/").at(-1) ?? "";
  const socket = req.socket as Socket;
  const whenClosed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  const record: Seen = { written: 0, closed: false, whenClosed };
  void record.whenClosed.then(() => {
    record.closed = true;
  });
  seen.set(id, record);
  // The client going away mid-write is what the test wants: not an error of the service.
  res.on("error", () => {});
  socket.on("error", () => {});
  req.resume();
  const kind = req.url?.split("/")[1];
  req.once("end", () => {
    if (kind === "endless-201") {
      res.writeHead(201, { location: `https://127.0.0.1/message/${id}` });
      void endless(res, record);
    } else if (kind === "endless-500") {
      res.writeHead(500);
      void endless(res, record);
    } else if (kind === "huge-400") {
      res.writeHead(400, { "content-length": String(256 * 1024 * 1024) });
      void endless(res, record);
    } else if (kind === "trickle-503") {
      res.writeHead(503);
      const timer = setInterval(() => {
        record.written += 1;
        res.write("x");
      }, 20);
      void record.whenClosed.then(() => clearInterval(timer));
    }
    // silent: no answer at all, ever.
  });
});
server.listen(0, "127.0.0.1");
await once(server, "listening");
t.teardown(() => {
  server.closeAllConnections();
  server.close();
});
const origin = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;

const DEADLINE_MS = 500;
const provider = createWebPushProvider({
  vapid: { subject: "mailto:ops@notify.example", ...webpush.generateVAPIDKeys() },
  ca: tls.cert,
  allowedHosts: ["127.0.0.1"],
  allowPrivateNetworks: true,
  ttlSeconds: { transactional: 60, promotional: 60 },
  timeoutMs: DEADLINE_MS,
});

/** A push to the fake service's `kind` route, with a subscription of its own (its id ends the path). */
function push(kind: string): { id: string; message: OutboundMessage } {
  const id = randomUUID();
  const keys = createECDH("prime256v1");
  keys.generateKeys();
  const subscription = {
    endpoint: `${origin}/${kind}/${id}`,
    keys: { p256dh: keys.getPublicKey("base64url"), auth: randomBytes(16).toString("base64url") },
  };
  return {
    id,
    message: {
      notificationId: id,
      channel: "push",
      to: JSON.stringify(subscription),
      subject: "Hi",
      body: "Hello",
      category: "orders",
      priority: "transactional",
    },
  };
}

/** Sends, and answers the result with how long the send took. */
async function send(kind: string) {
  const { id, message } = push(kind);
  const started = performance.now();
  const result = await provider.send(message);
  return { id, result, ms: performance.now() - started };
}

/** The connection the request went on is closed within a generous bound, and the service stops writing. */
async function closedSoon(t: Test, id: string): Promise<Seen> {
  const record = seen.get(id);
  if (record === undefined) throw new Error(`the service never saw ${id}`);
  const closed = await Promise.race([
    record.whenClosed.then(() => true),
    new Promise<false>((resolve) => setTimeout(() => resolve(false), 5000)),
  ]);
  t.ok(closed, "the connection is closed: nothing goes on reading it");
  const written = record.written;
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.equal(record.written, written, "and the service writes no more");
  return record;
}

t.test("an accepted push answered with an endless body: accepted, the body read to the cap only", async (t) => {
  const { id, result } = await send("endless-201");
  t.same(result, { outcome: "accepted", providerId: `https://127.0.0.1/message/${id}` });
  const record = await closedSoon(t, id);
  // Loopback and TLS buffers take a few MiB before the reader's side is full; an unbounded
  // reader would have taken everything written until the deadline and after.
  t.ok(record.written < 32 * 1024 * 1024, `what the service managed to write stays bounded (${record.written} bytes)`);
});

t.test("a refusal with an endless or huge body: classified by its status, its reason short", async (t) => {
  const endless500 = await send("endless-500");
  t.match(endless500.result, { outcome: "transient", status: 500, reason: "webpush 500" });
  await closedSoon(t, endless500.id);
  const huge = await send("huge-400");
  t.match(huge.result, { outcome: "permanent", status: 400 });
  if (huge.result.outcome !== "permanent") return;
  t.ok(huge.result.reason.length < 300, "the reason quotes a little of the body, never all of it");
  t.match(huge.result.reason, /^webpush 400: x+$/);
  await closedSoon(t, huge.id);
  t.ok(MAX_PUSH_ANSWER_BYTES <= 16 * 1024, "the cap is a few KiB");
});

t.test("a push service that never answers: transient at the deadline, the request aborted", async (t) => {
  const { id, result, ms } = await send("silent");
  t.same(result, { outcome: "transient", reason: `webpush timed out after ${DEADLINE_MS} ms` });
  t.notOk("notSent" in result, "the request was written: it may have been accepted");
  t.ok(ms >= DEADLINE_MS - 50 && ms < DEADLINE_MS + 5000, `it ends at the deadline (${Math.round(ms)} ms)`);
  await closedSoon(t, id);
});

t.test("an answer that trickles without end: its status decides at the deadline", async (t) => {
  const { id, result, ms } = await send("trickle-503");
  t.match(result, { outcome: "transient", status: 503, reason: "webpush 503" });
  t.ok(ms < DEADLINE_MS + 5000, `no later than the deadline (${Math.round(ms)} ms)`);
  await closedSoon(t, id);
});

t.test("many sends to such endpoints leave nothing open or reading", async (t) => {
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      send(["endless-201", "silent", "endless-500", "trickle-503"][i % 4] as string),
    ),
  );
  await Promise.all(results.map(({ id }) => closedSoon(t, id)));
  const open = await new Promise<number>((resolve) => server.getConnections((_, n) => resolve(n)));
  t.equal(open, 0, "the service holds no connection of ours");
});
