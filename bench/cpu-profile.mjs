// Preloaded into an app (NODE_OPTIONS=--import=<this file>, which allows no --cpu-prof): records
// a V8 CPU profile from start to exit and writes it to $CPU_PROFILE_DIR/<app>-<pid>.cpuprofile.
// With ALLOC_PROFILE=1 also what the process allocates, collected or not (V8's sampling heap
// profiler, one sample per 16 KiB on average), to <app>-<pid>.heapprofile: what feeds the
// garbage collector, by allocating function.
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
  const allocations = process.env.ALLOC_PROFILE === "1";
  if (allocations) {
    session.post("HeapProfiler.enable");
    session.post("HeapProfiler.startSampling", {
      samplingInterval: 16384,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  }
  process.on("exit", () => {
    // An in-thread session answers synchronously, so the profile is written before the exit.
    session.post("Profiler.stop", (error, result) => {
      if (!error) writeFileSync(join(dir, `${name}-${process.pid}.cpuprofile`), JSON.stringify(result.profile));
    });
    if (allocations)
      session.post("HeapProfiler.stopSampling", (error, result) => {
        if (!error) writeFileSync(join(dir, `${name}-${process.pid}.heapprofile`), JSON.stringify(result.profile));
      });
  });
}
