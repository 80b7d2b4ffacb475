import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "@notify/devstack";
import t from "tap";
import { parse } from "yaml";

// compose.yaml does not serve the operator console on the compose network over plain HTTP:
// every ingest there binds its operator's port beyond loopback, so the console is off unless
// .env turns it on together with CONSOLE_TLS (a TLS proxy in front). Values are read as compose
// reads them from an environment: ${NAME:-default} takes the default when NAME is unset or empty.

interface Service {
  command?: string[];
  environment?: Record<string, string>;
}
const compose = parse(readFileSync(join(ROOT, "compose.yaml"), "utf8"), { merge: true }) as {
  services: Record<string, Service>;
};
const ingests = Object.entries(compose.services).filter(([, s]) => s.command?.[1] === "apps/ingest/dist/main.js");

/** A compose value with `${NAME:-default}` and `${NAME}` read from `env`. */
const interpolate = (value: string, env: Record<string, string>) =>
  value.replace(/\$\{(\w+)(?::-([^}]*))?\}/g, (_, name: string, fallback?: string) => env[name] || fallback || "");

const setting = (s: Service, name: string, env: Record<string, string>) =>
  interpolate(s.environment?.[name] ?? "", env);

t.test("every ingest binds its operator's port beyond loopback, with the console off", async (t) => {
  t.ok(ingests.length >= 3, "the single node's ingest and the cluster's two");
  for (const [name, s] of ingests) {
    t.equal(s.environment?.ADMIN_HOST, "0.0.0.0", `${name}: the operator's port is on the compose network`);
    t.equal(setting(s, "CONSOLE_ENABLED", {}), "false", `${name}: so the console is off`);
    t.equal(setting(s, "CONSOLE_TLS", {}), "false", `${name}: and not claimed to be behind TLS`);
  }
});

t.test(".env turns it on only with CONSOLE_TLS beside it", async (t) => {
  const env = { CONSOLE_ENABLED: "true", CONSOLE_TLS: "true" };
  for (const [name, s] of ingests) {
    t.equal(setting(s, "CONSOLE_ENABLED", env), "true", name);
    t.equal(setting(s, "CONSOLE_TLS", env), "true", name);
  }
});
