#!/usr/bin/env node
import { common, parseConfig } from "@notify/config";
import { createDb, type Database } from "@notify/db";
import * as v from "valibot";
import { run } from "./cli.js";

const CliConfig = v.object({ DATABASE_URL: common.DATABASE_URL });

let database: Database | undefined;
const deps = {
  // Connected on first use, so `help` and usage errors need no DATABASE_URL.
  get database(): Database {
    database ??= createDb({
      url: parseConfig(CliConfig, process.env).DATABASE_URL,
      max: 2,
      applicationName: "notify-cli",
    });
    return database;
  },
};

try {
  process.exitCode = await run(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr }, deps);
} finally {
  await database?.close();
}
