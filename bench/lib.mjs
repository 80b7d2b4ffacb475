import { fork } from "node:child_process";
import { randomUUID } from "node:crypto";
import autocannon from "autocannon";

/** Runs autocannon and returns req/s and latency percentiles (ms). */
export async function load({ url, body, headers, connections, seconds, uniqueKeys }) {
  const result = await autocannon({
    url,
    method: "POST",
    connections,
    duration: seconds,
    headers: { "content-type": "application/json", ...headers },
    body,
    // A fresh Idempotency-Key per request, so every request is a new notification.
    requests: uniqueKeys
      ? [{ setupRequest: (req) => ({ ...req, headers: { ...req.headers, "idempotency-key": randomUUID() } }) }]
      : undefined,
  });
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    total: result.requests.total,
  };
}

export function startHello(port) {
  return new Promise((resolve, reject) => {
    const child = fork(new URL("./hello.mjs", import.meta.url), {
      env: { ...process.env, PORT: String(port) },
      stdio: "ignore",
    });
    child.once("message", () => resolve(child));
    child.once("exit", (code) => reject(new Error(`hello exited ${code}`)));
  });
}

export const fmt = (r) =>
  `${r.rps.toFixed(0).padStart(7)} req/s   p50 ${String(r.p50).padStart(4)} ms   p99 ${String(r.p99).padStart(4)} ms   (${r.total} requests, ${r.non2xx} non-2xx, ${r.errors} errors)`;
