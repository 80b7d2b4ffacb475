import { run } from "../src/cli.js";
import type { CliDeps } from "../src/command.js";

/** What one run of `notify` printed and answered. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `notify argv` in this process with `deps`, capturing what it prints. */
export async function runCli(argv: string[], deps: CliDeps): Promise<CliRun> {
  let stdout = "";
  let stderr = "";
  const io = {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
  };
  const code = await run(argv, io, deps);
  return { code, stdout, stderr };
}
