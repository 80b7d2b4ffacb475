import { execFileSync } from "node:child_process";
import { join } from "node:path";
import t from "tap";

// The tasks a developer runs with turbo (`turbo run build`, `typecheck`, `test`, `dev`) plan
// without error: turbo refuses a task graph with a cycle, and the packages' dev dependencies on
// @notify/testing (which depends on them) make one out of any per-package `^build` edge.
const root = join(import.meta.dirname, "..", "..", "..");
const plan = (...tasks: string[]) => {
  const out = execFileSync(join(root, "node_modules", ".bin", "turbo"), ["run", ...tasks, "--dry=json"], {
    cwd: root,
    encoding: "utf8",
    env: { ...process.env, TURBO_TELEMETRY_DISABLED: "1", DO_NOT_TRACK: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  return JSON.parse(out) as { tasks: { taskId: string; dependencies: string[] }[] };
};

t.test("turbo plans build, typecheck, test and dev", async (t) => {
  const { tasks } = plan("build", "typecheck", "test", "dev");
  const ids = new Set(tasks.map((task) => task.taskId));
  t.ok(ids.has("//#build"), "one build of every package through the project references");
  t.ok(ids.has("@notify/ingest#dev"));
  for (const task of tasks.filter((task) => /#(typecheck|test)$/.test(task.taskId))) {
    t.same(task.dependencies, ["//#build"], `${task.taskId} runs on the built packages`);
  }
});
