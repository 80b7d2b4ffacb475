// npm run fresh-starts: what a newcomer does, N times in a row (FRESH_STARTS, default 5): a fresh
// clone of this repository's HEAD with no node_modules and no .data, `npm start`, the printed
// curl, its status until every channel is delivered, Ctrl-C. Prints each start's time to the
// banner and to delivery, and fails if any start fails. No dependencies: it runs before install.
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const runs = Number(process.env.FRESH_STARTS ?? 5);
const results = [];

for (let run = 1; run <= runs; run++) {
  const dir = mkdtempSync(join(tmpdir(), "notify-fresh-"));
  // A clone is 0755 like any other; mkdtemp makes 0700, which the postgres user could not enter.
  chmodSync(dir, 0o755);
  execFileSync("git", ["clone", "--quiet", root, dir]);
  const started = Date.now();
  const child = spawn("npm", ["start"], {
    cwd: dir,
    detached: true,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, PORT: "0" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  for (const stream of [child.stdout, child.stderr]) stream.on("data", (chunk) => (output += chunk));
  // npm itself ends by the SIGINT it was sent, as in a terminal; what counts is that the stack stopped.
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal)));
  let outcome;
  try {
    await until(
      () => output.includes("notify is running."),
      600_000,
      () => `no banner:\n${output.slice(-3000)}`,
    );
    const bannerMs = Date.now() - started;
    const env = Object.fromEntries(
      readFileSync(join(dir, ".data", "stack.env"), "utf8")
        .split("\n")
        .filter((line) => /^[A-Z_]+=/.test(line))
        .map((line) => [line.slice(0, line.indexOf("=")), JSON.parse(line.slice(line.indexOf("=") + 1))]),
    );
    // The curl the banner prints, as it prints it.
    const curl = /curl -sS -X POST [^\n]+\n(?:\s+-H [^\n]+\n)+\s+-d '([^']+)'/.exec(output);
    if (!curl) throw new Error("the banner has no curl to send a notification");
    const key = readFileSync(join(dir, ".data", "dev-api-key"), "utf8").trim();
    const auth = { authorization: `Bearer ${key}` };
    const response = await fetch(`${env.NOTIFY_BASE_URL}/api/v1/notifications`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json", "idempotency-key": crypto.randomUUID() },
      body: curl[1],
    });
    const { notification_id: id } = await response.json();
    if (response.status !== 202) throw new Error(`POST answered ${response.status}`);
    let status;
    await until(
      async () => {
        status = (await (await fetch(`${env.NOTIFY_BASE_URL}/api/v1/notifications/${id}`, { headers: auth })).json())
          .status;
        return status === "completed";
      },
      60_000,
      () => `notification ${id} is ${status}`,
    );
    outcome = { run, ok: true, bannerMs, deliveredMs: Date.now() - started };
  } catch (error) {
    outcome = { run, ok: false, error: error.message };
  }
  try {
    process.kill(-child.pid, "SIGINT");
  } catch {}
  const code = await Promise.race([exited, new Promise((resolve) => setTimeout(() => resolve("timeout"), 60_000))]);
  const left = () => {
    try {
      const pid = Number(readFileSync(join(dir, ".data", "infra.pid"), "utf8"));
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  await until(
    () => !left(),
    30_000,
    () => "",
  ).catch(() => {});
  if ((code !== 0 && code !== "SIGINT") || left() || !output.includes("stopping...")) {
    if (outcome.ok) outcome = { run, ok: false, error: `after Ctrl-C: exit ${code}, servers still running: ${left()}` };
  }
  results.push(outcome);
  console.log(
    outcome.ok
      ? `start ${run}: banner after ${(outcome.bannerMs / 1000).toFixed(1)} s (install and build included), delivered on all four channels after ${(outcome.deliveredMs / 1000).toFixed(1)} s, Ctrl-C clean`
      : `start ${run}: FAILED: ${outcome.error}`,
  );
  rmSync(dir, { recursive: true, force: true });
}
const failed = results.filter((r) => !r.ok).length;
console.log(`${runs - failed} of ${runs} fresh starts succeeded`);
process.exit(failed ? 1 : 0);

async function until(check, timeoutMs, why) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(why());
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
