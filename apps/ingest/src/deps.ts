import type { Bus } from "@notify/bus";
import type { Database } from "@notify/db";
import type { MetricsRegistry, VersionLifecycle } from "@notify/http";
import type { Logger } from "@notify/log";
import type { Principal } from "./auth/api-keys.js";
import type { RateLimiter } from "./auth/rate-limit.js";
import type { Ingestor } from "./notifications/create.js";
import type { TemplateInfo } from "./notifications/templates.js";

/** Everything the ingest routes need, built once in main.ts (tests build their own). */
export interface IngestDeps {
  /** Where the request-duration histogram goes; none in most tests. */
  metrics?: MetricsRegistry;
  database: Database;
  bus: Bus;
  log: Logger;
  lookupKey: (key: string) => Promise<Principal | null>;
  templates: (id: string) => Promise<TemplateInfo | null>;
  /** Accepts notifications with group commit (notifications/create.ts). */
  ingestor: Ingestor;
  maxBodyBytes: number;
  /** HMAC key of list cursors (CURSOR_SECRET). */
  cursorSecret: string;
  /** Inbound leaky buckets per key (default: 1000/s with a queue of 2000). */
  rateLimiter?: RateLimiter;
  /** Deprecation lifecycle of /api/v1 (default: current, no headers). */
  lifecycle?: VersionLifecycle;
  isStopping: () => boolean;
}
