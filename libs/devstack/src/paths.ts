import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** Repository root, found from this file (libs/devstack/{src,dist}/paths.*). */
export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const APPS = ["ingest", "processor", "workers", "receipts"] as const;
export type AppName = (typeof APPS)[number];
/** The four apps in one process (apps/standalone). */
export const STANDALONE = "standalone";
export type ProcessName = AppName | typeof STANDALONE;
export const appEntry = (app: ProcessName) => join(ROOT, "apps", app, "dist", "main.js");
