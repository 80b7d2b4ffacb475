#!/usr/bin/env node
import { existsSync } from "node:fs";
import { join } from "node:path";
import { type Bus, connectBus } from "@notify/bus";
import { parseConfig } from "@notify/config";
import { createDb, type Database } from "@notify/db";
import { run } from "./cli.js";
import { CliConfig, NatsConfig } from "./config.js";

// Next to a stack started with `npm start`, the CLI needs no settings: with neither DATABASE_URL
// nor NATS_URL set it reads the running stack's from <DATA_DIR>/stack.env (DATA_DIR: ./.data).
const stackEnv = join(process.env.DATA_DIR ?? ".data", "stack.env");
if (process.env.DATABASE_URL === undefined && process.env.NATS_URL === undefined && existsSync(stackEnv)) {
  process.loadEnvFile(stackEnv);
}

let database: Database | undefined;
let bus: Bus | undefined;
const deps = {
  // Connected on first use, so `help` and usage errors need no DATABASE_URL (nor NATS).
  get database(): Database {
    const config = parseConfig(CliConfig, process.env);
    database ??= createDb({
      url: config.DATABASE_URL,
      max: 2,
      applicationName: "notify-cli",
      statementTimeoutMs: config.DB_STATEMENT_TIMEOUT_MS,
    });
    return database;
  },
  async bus(): Promise<Bus> {
    if (!bus) {
      const config = parseConfig(NatsConfig, process.env);
      bus = await connectBus({
        servers: config.NATS_URL,
        name: "notify-cli",
        role: "operator",
        ...(config.NATS_USER ? { user: config.NATS_USER, password: config.NATS_PASSWORD ?? "" } : {}),
        namespace: config.NATS_NAMESPACE,
        partitions: config.LANE_PARTITIONS,
      });
    }
    return bus;
  },
  criticalCategories: (process.env.CRITICAL_CATEGORIES ?? "security,otp")
    .split(",")
    .map((c) => c.trim())
    .filter(Boolean),
  env: process.env,
};

try {
  process.exitCode = await run(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr }, deps);
} finally {
  await bus?.close();
  await database?.close();
}
