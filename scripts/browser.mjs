#!/usr/bin/env node
// Runs before `npm test`: the console's browser tests drive Chromium through playwright-core,
// which downloads no browser of its own here. Uses CHROMIUM_PATH or the system's Chromium;
// when there is none and this is Debian or Ubuntu run as root, installs Debian's `chromium`
// package. Where it cannot, it says how, and the browser tests fail naming the same fix
// (they are never skipped).
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";

const CANDIDATES = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"];
const found = () => [process.env.CHROMIUM_PATH, ...CANDIDATES].find((path) => path && existsSync(path));

if (!found()) {
  const root = typeof process.getuid === "function" && process.getuid() === 0;
  if (root && existsSync("/usr/bin/apt-get")) {
    console.error("Installing Chromium for the console's browser tests (apt-get install chromium)...");
    const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
    const install = () =>
      execFileSync("apt-get", ["install", "-y", "--no-install-recommends", "chromium"], {
        stdio: ["ignore", 2, 2],
        env,
      });
    try {
      install();
    } catch {
      // A machine whose package lists are old or missing: refresh them once and try again.
      try {
        execFileSync("apt-get", ["update"], { stdio: ["ignore", 2, 2], env });
        install();
      } catch {
        // Reported below.
      }
    }
  }
  if (!found()) {
    console.warn(
      "Chromium not found: the console's browser tests will fail. Install it (Debian/Ubuntu: " +
        "`apt-get install chromium`) or set CHROMIUM_PATH to a Chromium or Chrome binary.",
    );
  }
}
