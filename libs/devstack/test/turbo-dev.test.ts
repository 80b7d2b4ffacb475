import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, SAMPLE_NOTIFICATION } from "@notify/devstack";
import { devKey, eventually, postNotification, serversAlive, settledView, stackEnv } from "@notify/testing";
import t from "tap";

// `turbo dev` from the repository, as the user's card says: the dev stack (embedded Postgres,
// nats-server, sandboxes, migrations, seed) and the four apps from source under node --watch,
// on the same kind of data folder as npm start, with no environment but PATH and HOME.
const dataDir = mkdtempSync(join(tmpdir(), "notify-dev-"));
const turbo = spawn(join(ROOT, "node_modules", ".bin", "turbo"), ["run", "dev", "--ui=stream"], {
  cwd: ROOT,
  detached: true,
  env: {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "",
    DATA_DIR: dataDir,
    PORT: "0",
    TURBO_TELEMETRY_DISABLED: "1",
    DO_NOT_TRACK: "1",
  },
  stdio: ["ignore", "pipe", "pipe"],
});
const output: string[] = [];
for (const stream of [turbo.stdout, turbo.stderr]) stream?.on("data", (chunk) => output.push(String(chunk)));
const exited = new Promise<void>((resolve) => turbo.once("exit", () => resolve()));
t.teardown(async () => {
  try {
    process.kill(-(turbo.pid as number), "SIGKILL");
  } catch {}
  await eventually(async () => (serversAlive(dataDir) ? undefined : true), 20_000, "servers to stop").catch(() => {});
  rmSync(dataDir, { recursive: true, force: true });
});

/** The last lines an app printed (turbo prefixes them with its package), for a failure message. */
const appLines = (app: string) =>
  output
    .join("")
    .split("\n")
    .filter((line) => line.includes(`@notify/${app}:`) || line.includes(`[${app}`))
    .slice(-40)
    .join("\n");

t.test("turbo dev runs every app from source on the embedded stack, and Ctrl-C stops it all", async (t) => {
  const settings = await eventually(
    async () =>
      JSON.parse(readFileSync(join(dataDir, "dev.json"), "utf8")) as {
        ports: Record<string, number>;
        adminPorts: Record<string, number>;
      },
    120_000,
    `the dev stack to come up:\n${output.join("").slice(-2000)}`,
  );
  for (const [app, appPort] of Object.entries(settings.ports)) {
    const port = settings.adminPorts[app] ?? appPort;
    await eventually(
      async () => ((await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null))?.ok ? true : undefined),
      120_000,
      `${app} to be ready; its lines:\n${appLines(app)}`,
    );
  }
  const env = stackEnv(dataDir);
  const key = devKey(dataDir);
  const id = await postNotification(env.NOTIFY_BASE_URL as string, key, SAMPLE_NOTIFICATION);
  const view = await settledView(env.NOTIFY_BASE_URL as string, key, id);
  t.equal(view.status, "completed", "delivered on all four channels");
  t.match(output.join(""), /\[ingest\s*\] \S+ info\s+ingest listening/, "app lines are printed for people");

  process.kill(-(turbo.pid as number), "SIGINT");
  await exited;
  await eventually(async () => (serversAlive(dataDir) ? undefined : true), 30_000, "Postgres and NATS to stop");
  t.pass("Ctrl-C stopped the apps, then Postgres and nats-server");
});
