// Preloaded into an app (NODE_OPTIONS=--import=<this file>, which allows no --cpu-prof): records
// a V8 CPU profile from start to exit and writes it to $CPU_PROFILE_DIR/<app>-<pid>.cpuprofile.
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector";
import { join } from "node:path";

const dir = process.env.CPU_PROFILE_DIR;
if (dir) {
  const session = new Session();
  session.connect();
  session.post("Profiler.enable");
  session.post("Profiler.setSamplingInterval", { interval: 1000 });
  session.post("Profiler.start");
  const script = process.argv[1] ?? "";
  const name = /apps\/([^/]+)\//.exec(script)?.[1] ?? /bench\/([^/]+)\.mjs$/.exec(script)?.[1] ?? "node";
  process.on("exit", () => {
    // An in-thread session answers synchronously, so the profile is written before the exit.
    session.post("Profiler.stop", (error, result) => {
      if (!error) writeFileSync(join(dir, `${name}-${process.pid}.cpuprofile`), JSON.stringify(result.profile));
    });
  });
}
