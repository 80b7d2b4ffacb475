import { freshDatabase, freshNamespace } from "@notify/testing";
import t from "tap";
import { startIngest } from "./support.js";

// Where the console is served: its sign-in form carries an operator key and its cookie a
// session, so on an interface beyond this machine it is served only when a TLS proxy serves it
// to browsers (CONSOLE_TLS); otherwise it is off, and ingest says so at start.

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
