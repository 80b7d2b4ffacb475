import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import t from "tap";

// What an app logs to standard output is written as it is logged: a process killed right after
// logging (SIGKILL, the OOM killer) leaves every line it logged on its output.
const index = fileURLToPath(new URL("../src/index.ts", import.meta.url));

t.test("every line logged before a SIGKILL is on standard output", async (t) => {
  const script = `
    const { createLogger } = await import(${JSON.stringify(index)});
    const log = createLogger({ name: "killed", level: "info" });
    for (let i = 0; i < 200; i++) log.info({ i }, "line");
    process.kill(process.pid, "SIGKILL");
  `;
  const child = spawn(process.execPath, ["--import=tsx", "--input-type=module", "-e", script], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    out += chunk;
  });
  const signal = await new Promise((resolve) => child.once("close", (_code, signal) => resolve(signal)));
  t.equal(signal, "SIGKILL");
  const lines = out.split("\n").filter((line) => line.length > 0);
  t.equal(lines.length, 200, "all 200 lines");
  t.same(
    lines.map((line) => (JSON.parse(line) as { i: number }).i),
    Array.from({ length: 200 }, (_, i) => i),
    "whole and in order",
  );
});
