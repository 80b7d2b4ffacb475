import t from "tap";
import { consoleRefusal, isLoopbackHost } from "../src/security.js";

// Where the console may be served: its sign-in form carries an operator key and its cookie a
// session, so beyond loopback it is served only behind TLS (CONSOLE_TLS).

t.test("loopback is this machine's own interfaces, however written", async (t) => {
  for (const host of ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "localhost"]) {
    t.ok(isLoopbackHost(host), host);
  }
  for (const host of ["0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "::ffff:10.0.0.1", "ingest", "example.com", ""]) {
    t.notOk(isLoopbackHost(host), host || "(empty)");
  }
});

t.test("off beyond loopback unless served over TLS; the refusal says what to set", async (t) => {
  t.equal(consoleRefusal({ host: "127.0.0.1", tls: false }), undefined);
  t.equal(consoleRefusal({ host: "0.0.0.0", tls: true }), undefined);
  const refusal = consoleRefusal({ host: "0.0.0.0", tls: false });
  t.match(refusal, /ADMIN_HOST 0\.0\.0\.0 is not a loopback address/);
  t.match(refusal, /CONSOLE_TLS=true/);
  t.match(refusal, /ADMIN_HOST=127\.0\.0\.1/);
  t.match(refusal, /CONSOLE_ENABLED=false/);
});
