import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NATS_CONF_FILE, passwordVariable, ROLES, type Role } from "@notify/bus";
import { freePort, startLocalNats } from "@notify/devstack/local";

export interface NatsWithUsers {
  url: string;
  /** The password of each role's user, as the server was given it. */
  passwords: Record<Role, string>;
  /** The server's log: permission violations are written there. */
  logFile: string;
  /** What the server refused, as its log says: `Publish Violation - User "x", Subject "y"`. */
  violations(): string[];
  stop(): Promise<void>;
}

/**
 * A nats-server of the test file's own, run with nats/nats.conf (one user per role, each allowed
 * only its subjects), random passwords, a free port and a temporary store; stopped and removed
 * on teardown.
 */
export async function startNatsWithUsers(t: { teardown(fn: () => unknown): void }): Promise<NatsWithUsers> {
  const dataDir = mkdtempSync(join(tmpdir(), "notify-nats-users-"));
  const logFile = join(dataDir, "nats-server.log");
  // As the docs say to make them: the server parses a variable's value, so a letter comes first.
  const passwords = Object.fromEntries(ROLES.map((role) => [role, `p${randomBytes(18).toString("hex")}`])) as Record<
    Role,
    string
  >;
  const nats = await startLocalNats({
    dataDir,
    port: await freePort(),
    logFile,
    configFile: NATS_CONF_FILE,
    env: Object.fromEntries(ROLES.map((role) => [passwordVariable(role), passwords[role]])),
  });
  t.teardown(async () => {
    await nats.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });
  return {
    url: nats.url,
    passwords,
    logFile,
    violations: () =>
      readFileSync(logFile, "utf8")
        .split("\n")
        .filter((line) => /Violation - User|Authorization Error/i.test(line))
        .map((line) => line.replace(/^.*? - cid:\d+ - (".*?" - )?/, "")),
    stop: () => nats.stop(),
  };
}
