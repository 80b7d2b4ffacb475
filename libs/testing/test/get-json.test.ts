import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import t from "tap";
import { getJson } from "../src/embedded.js";

// A connection dropped before the answer (a server closing an idle keep-alive connection the
// client had just reused) is tried again; an answer that is not 2xx is not.
t.test("getJson tries again when the connection drops, not when the server answers an error", async (t) => {
  let requests = 0;
  const server = createServer((req, res) => {
    requests++;
    if (req.url === "/drop" && requests % 2 === 1) {
      req.socket.resetAndDestroy();
      return;
    }
    if (req.url === "/missing") {
      res.writeHead(404).end("no such thing");
      return;
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ok: true }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  t.same(await getJson(`${base}/drop`), { ok: true }, "answered after the reset");
  t.equal(requests, 2, "the dropped request was sent once more");
  await t.rejects(getJson(`${base}/missing`), /answered 404: no such thing/, "a 404 is an error at once");
  t.equal(requests, 3, "and is not tried again");
});
