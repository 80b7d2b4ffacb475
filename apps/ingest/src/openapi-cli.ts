import { createLogger } from "@notify/log";
import { createApp } from "./app.js";
import type { IngestDeps } from "./deps.js";

// Prints the OpenAPI document of /api/v1 (what GET /api/v1/openapi.json answers) to stdout,
// without Postgres, NATS or a socket: the document comes from the routes' contracts alone. What
// libs/inbox-client generates its types from. The app is built on dependencies that throw when
// touched, so a document that needed one would fail here rather than differ from the served one.
const inert = new Proxy(
  {},
  {
    get(_target, property) {
      throw new Error(`building the OpenAPI document touched a dependency (${String(property)})`);
    },
  },
) as never;

const deps: IngestDeps = {
  database: inert,
  bus: inert,
  log: createLogger({ name: "ingest", level: "silent" }),
  lookupKey: inert,
  templates: inert,
  ingestor: inert,
  maxBodyBytes: 65_536,
  cursorSecret: "openapi-document-only-never-signs-a-cursor",
  isStopping: () => false,
};

const response = await createApp(deps).request("/api/v1/openapi.json");
if (response.status !== 200) {
  process.stderr.write(`GET /api/v1/openapi.json answered ${response.status}\n`);
  process.exit(1);
}
process.stdout.write(`${JSON.stringify(await response.json(), null, 2)}\n`);
