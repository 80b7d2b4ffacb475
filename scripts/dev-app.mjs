#!/usr/bin/env node
// `turbo dev` runs this as each app's dev task: it waits until the dev stack (the @notify/devstack
// dev task: embedded Postgres, nats-server, sandboxes, migrations, seed) has written its settings
// to <DATA_DIR>/dev.json, then runs the app from source with node --watch on those settings, its
// own environment (the shell's and .env) taking precedence where the stack only had a default.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const app = basename(process.cwd());
const dataDir = process.env.DATA_DIR ?? join(root, ".data");
const settingsFile = join(dataDir, "dev.json");
if (existsSync(join(root, ".env"))) process.loadEnvFile(join(root, ".env"));

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === "EPERM";
  }
};
const read = () => {
  try {
    const settings = JSON.parse(readFileSync(settingsFile, "utf8"));
    return alive(settings.pid) ? settings : null;
  } catch {
    return null;
  }
};

let settings = read();
if (!settings) process.stdout.write(`${app}: waiting for the dev stack (${settingsFile})...\n`);
const deadline = Date.now() + 180_000;
while (!settings) {
  if (Date.now() > deadline) {
    process.stderr.write(
      `${app}: the dev stack did not come up; run \`npm run dev\` (turbo dev) from the repository root\n`,
    );
    process.exit(1);
  }
  await new Promise((resolve) => setTimeout(resolve, 250));
  settings = read();
}

// Imported only now: on a fresh clone the dev stack's task has just built it.
const { APP_NODE_OPTIONS, formatLine } = await import("@notify/devstack");
const nodeArgs = [...APP_NODE_OPTIONS, "--watch", "--conditions=@notify/source", "--import", "tsx", "src/main.ts"];
const child = spawn(process.execPath, nodeArgs, {
  stdio: ["inherit", "pipe", "pipe"],
  env: {
    ...process.env,
    ...settings.env,
    PORT: String(settings.ports[app]),
    ...(settings.adminPorts?.[app] === undefined ? {} : { ADMIN_PORT: String(settings.adminPorts[app]) }),
  },
});
// The app logs JSON (pino); the task shows its lines as a person reads them, as npm start does.
for (const stream of [child.stdout, child.stderr]) {
  createInterface({ input: stream }).on("line", (line) => process.stdout.write(formatLine(app, line)));
}
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
