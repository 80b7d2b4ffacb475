import diagnostics from "node:diagnostics_channel";
import { once } from "node:events";
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { type AddressInfo, createServer, type Socket } from "node:net";
import t, { type Test } from "tap";
import { createSendgridProvider } from "../src/index.js";
import { SendgridHttpClient } from "../src/sendgrid/http-client.js";
import { neverSent, transportFailure } from "../src/transport.js";

// How the SendGrid provider's HTTP exchange ends when it does not end with an answer, and
// whether the send may be retried: a failure before the request was handed to a connected
// socket cannot have reached SendGrid (retried); one after may have (an unknown outcome, never
// retried), whatever the error's code says.

const message = {
  notificationId: "n-1",
  channel: "email" as const,
  to: "user@example.com",
  subject: "Hello",
  body: "<p>Hello</p>",
  category: "welcome",
  priority: "transactional" as const,
  deliverBy: null,
};

async function listen(t: Test, server: ReturnType<typeof createServer> | ReturnType<typeof createHttpServer>) {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  t.teardown(() => {
    (server as { closeAllConnections?: () => void }).closeAllConnections?.();
    server.close();
  });
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A Mail Send stand-in answering 202 with `messageId`; `urls` are the request targets it saw. */
async function acceptingServer(t: Test, messageId: string): Promise<{ host: string; urls: string[] }> {
  const urls: string[] = [];
  const host = await listen(
    t,
    createHttpServer((req: IncomingMessage, res: ServerResponse) => {
      urls.push(req.url ?? "");
      req.resume();
      req.once("end", () => res.writeHead(202, { "x-message-id": messageId }).end());
    }),
  );
  return { host, urls };
}

const provider = (t: Test, baseUrl: string, timeoutMs = 2000) => {
  const made = createSendgridProvider({ apiKey: "SG.secret-key", baseUrl, from: "n@example.com", timeoutMs });
  t.teardown(() => made.close?.());
  return made;
};

t.test("a connection that fails once the request was written is an unknown outcome, whatever its code", async (t) => {
  // EHOSTUNREACH on an established connection (its route died after the write) is also what a
  // connection that was never made reports; the request had reached the server here.
  let received = 0;
  let socket: Socket | undefined;
  const onHeaders = (m: unknown) => {
    socket = (m as { socket: Socket }).socket;
  };
  diagnostics.subscribe("undici:client:sendHeaders", onHeaders);
  t.teardown(() => diagnostics.unsubscribe("undici:client:sendHeaders", onHeaders));
  const host = await listen(
    t,
    createServer((s) =>
      s.on("data", (chunk) => {
        if (!String(chunk).includes("}")) return;
        received++;
        socket?.destroy(Object.assign(new Error("read EHOSTUNREACH"), { code: "EHOSTUNREACH" }));
      }),
    ),
  );
  const result = await provider(t, `http://${host}`).send(message);
  t.equal(received, 1, "the request reached the server");
  t.equal(result.outcome, "transient");
  t.notOk("notSent" in result && result.notSent, "not marked as never sent: a retry could send it twice");
  t.match(result.outcome === "accepted" ? "" : result.reason, /EHOSTUNREACH/);
});

t.test("a connection that cannot be made within half the deadline is never sent, and retried", async (t) => {
  // TCP is accepted but TLS never answers: the request is never written.
  const host = await listen(
    t,
    createServer(() => {}),
  );
  // Which timer ended the send is in its reason, not the wall clock (a loaded machine may run
  // both late): the send's deadline would have said "timed out after 1000 ms" and not marked it.
  const result = await provider(t, `https://${host}`, 1000).send(message);
  t.equal(result.outcome, "transient");
  t.ok("notSent" in result && result.notSent, "marked as never sent");
  t.match(
    result.outcome === "accepted" ? "" : result.reason,
    /UND_ERR_CONNECT_TIMEOUT/,
    "ended by the connect timeout",
  );
});

t.test("the server closing after reading the request is an unknown outcome", async (t) => {
  const host = await listen(
    t,
    createServer((s) => s.on("data", (chunk) => String(chunk).includes("}") && s.end())),
  );
  const result = await provider(t, `http://${host}`).send(message);
  t.equal(result.outcome, "transient");
  t.notOk("notSent" in result && result.notSent);
});

t.test("without a code-level answer, the code decides for the other providers", async (t) => {
  for (const code of ["ECONNREFUSED", "ENOTFOUND", "UND_ERR_CONNECT_TIMEOUT", "ERR_SSL_WRONG_VERSION_NUMBER"]) {
    t.ok(neverSent(code), `${code}: never sent`);
  }
  for (const code of ["ECONNRESET", "UND_ERR_SOCKET", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_ABORTED", "UND_ERR_CLOSED"]) {
    t.notOk(neverSent(code), `${code}: may have been sent`);
  }
  const notSent = (r: ReturnType<typeof transportFailure>) => "notSent" in r && r.notSent === true;
  t.notOk(notSent(transportFailure("x", "ECONNREFUSED", "", true)), "written: the phase wins over the code");
  t.ok(notSent(transportFailure("x", "ECONNRESET", "", false)), "never written: the phase wins over the code");
});

t.test("a base URL's own path is kept, as axios joined it", async (t) => {
  const { host, urls } = await acceptingServer(t, "m-1");
  const result = await provider(t, `http://${host}/sendgrid/`).send(message);
  t.same(result, { outcome: "accepted", providerId: "m-1" });
  t.same(urls, ["/sendgrid/v3/mail/send"]);
});

t.test("close() ends an answer still trickling in after its grace", async (t) => {
  const host = await listen(
    t,
    createHttpServer((req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      res.writeHead(500, { "content-type": "application/json" });
      const drip = setInterval(() => res.write(" "), 50);
      res.once("close", () => clearInterval(drip));
    }),
  );
  const client = new SendgridHttpClient({ connectMs: 1000, timeoutMs: 5000 });
  client.setApiKey("SG.secret-key");
  client.setDefaultRequest("baseUrl", `http://${host}`);
  const sending = client.request({ method: "POST", url: "/v3/mail/send", body: {} }).catch((error: unknown) => error);
  await new Promise((resolve) => setTimeout(resolve, 200));
  const started = Date.now();
  await client.close(300);
  t.ok(Date.now() - started < 2000, `closed in ${Date.now() - started} ms`);
  const ended = await Promise.race([sending, new Promise((resolve) => setTimeout(() => resolve("pending"), 5000))]);
  t.type(ended, Error, "the send in flight ends too");
});

t.test("proxies: the base URL's scheme's own, or ALL_PROXY; NO_PROXY honoured", async (t) => {
  const { host: proxyHost, urls: seen } = await acceptingServer(t, "via-proxy");
  const { host: direct } = await acceptingServer(t, "direct");
  const names = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
  ];
  const saved = Object.fromEntries(names.map((n) => [n, process.env[n]]));
  const setEnv = (values: Record<string, string>) => {
    for (const n of names) delete process.env[n];
    Object.assign(process.env, values);
  };
  t.teardown(() => {
    for (const n of names) {
      if (saved[n] === undefined) delete process.env[n];
      else process.env[n] = saved[n];
    }
  });
  const idOf = async () => {
    const result = await provider(t, `http://${direct}`).send(message);
    return result.outcome === "accepted" ? result.providerId : result.reason;
  };

  setEnv({ HTTP_PROXY: `http://${proxyHost}` });
  t.equal(await idOf(), "via-proxy", "HTTP_PROXY for an http base URL");
  t.match(seen.at(-1), new RegExp(`^http://${direct}/v3/mail/send$`), "asked for the whole URL");

  setEnv({ ALL_PROXY: `http://${proxyHost}` });
  t.equal(await idOf(), "via-proxy", "ALL_PROXY when the scheme has none");

  setEnv({ HTTPS_PROXY: `http://${proxyHost}` });
  t.equal(await idOf(), "direct", "HTTPS_PROXY is not for an http base URL");

  setEnv({ HTTP_PROXY: `http://${proxyHost}`, NO_PROXY: "127.0.0.1" });
  t.equal(await idOf(), "direct", "NO_PROXY covers the host");
});
