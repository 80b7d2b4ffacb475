import { freshDatabase, freshNamespace } from "@notify/testing";
import t from "tap";
import { consoleRefusal, isLoopbackHost } from "../src/security.js";
import { startIngest } from "./support.js";

// Where the console is served: its sign-in form carries an operator key and its cookie a
// session, so on an interface beyond this machine it is served only when a TLS proxy serves it
// to browsers (CONSOLE_TLS); otherwise it is off, and ingest says so at start.

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

const { url: databaseUrl } = await freshDatabase(t);
const namespace = freshNamespace(t);

/** Ingest as its own process with `settings`: its console is served or not by them. */
const startIngestWith = (settings: Record<string, string>) => startIngest(t, { databaseUrl, namespace }, settings);

const warnings = (lines: string[]) =>
  lines.flatMap((line) => {
    try {
      const entry = JSON.parse(line) as { level: number; msg: string };
      return entry.level === 40 ? [entry.msg] : [];
    } catch {
      return [];
    }
  });

t.test("on a shared interface without CONSOLE_TLS: /console answers 404, and the log says why", async (t) => {
  const { admin, lines } = await startIngestWith({ ADMIN_HOST: "0.0.0.0" });
  t.equal((await fetch(`${admin}/console/login`)).status, 404);
  t.equal((await fetch(`${admin}/console`, { redirect: "manual" })).status, 404);
  t.equal((await fetch(`${admin}/readyz`)).status, 200, "the operator's port itself serves");
  t.match(warnings(lines), [/the console is off: ADMIN_HOST 0\.0\.0\.0 .*CONSOLE_TLS=true/]);
});

t.test("the same interface with CONSOLE_TLS: served, no warning", async (t) => {
  const { admin, lines } = await startIngestWith({ ADMIN_HOST: "0.0.0.0", CONSOLE_TLS: "true" });
  t.equal((await fetch(`${admin}/console/login`)).status, 200);
  t.notMatch(warnings(lines).join("\n"), /console/);
});

t.test("turned off on purpose: 404 and no warning", async (t) => {
  const { admin, lines } = await startIngestWith({ ADMIN_HOST: "0.0.0.0", CONSOLE_ENABLED: "false" });
  t.equal((await fetch(`${admin}/console/login`)).status, 404);
  t.notMatch(warnings(lines).join("\n"), /console/);
});
