import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Test } from "tap";

export interface ReceivedPost {
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** What the receiver answered. */
  status: number;
}

export interface Receiver {
  /** Origin, e.g. http://127.0.0.1:54321 */
  readonly origin: string;
  readonly posts: ReceivedPost[];
  /** The status to answer the nth post with (0-based); replaceable mid-test. */
  answer: (index: number) => number;
}

/** A webhook receiver on loopback (apps/receipts' stand-in) whose answers a test scripts. */
export async function startReceiver(t: Test, answer: (index: number) => number = () => 200): Promise<Receiver> {
  const posts: ReceivedPost[] = [];
  const receiver: Receiver = { origin: "", posts, answer };
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on("end", () => {
      const status = receiver.answer(posts.length);
      posts.push({ url: `${receiver.origin}${req.url}`, headers: req.headers, body, status });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  return Object.assign(receiver, { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
}

/** A fresh folder for a test's journal, removed at teardown. */
export function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), "notify-sandbox-"));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export async function until(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}
