import { ConfigError } from "@notify/config";
import { audiences } from "./audiences.js";
import { broadcasts } from "./broadcasts.js";
import { type CliDeps, type CommandGroup, type Io, UsageError } from "./command.js";
import { dlq } from "./dlq.js";
import { keys } from "./keys.js";
import { retention } from "./retention.js";
import { suppressions } from "./suppressions.js";
import { webhooks } from "./webhooks.js";

/** New groups (dlq, audiences, retention, ...) are added here. */
const GROUPS: CommandGroup[] = [keys, dlq, audiences, broadcasts, retention, webhooks, suppressions];

export const EXIT = { ok: 0, failure: 1, usage: 2, config: 78 } as const;

const HELP = ["help", "-h", "--help"];

export const usage = () =>
  [
    "Usage: notify <command> [options]",
    "",
    ...GROUPS.map((group) => group.usage),
    "  notify help",
    "      Show this text.",
    "",
    "Environment: DATABASE_URL (required): notify talks to Postgres directly, so it works while the API is down.",
    "  dlq also reads NATS_URL (nats://127.0.0.1:4222), NATS_NAMESPACE and CRITICAL_CATEGORIES (security,otp).",
    "Exit status: 0 ok, 1 failure, 2 usage error, 78 configuration error.",
    "",
  ].join("\n");

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  // A refused connection can be an AggregateError without a message of its own.
  return error.message || String((error as { code?: unknown }).code ?? error.name);
}

/** Runs `notify <group> <command> [args]` and returns the exit status; it never throws. */
export async function run(argv: string[], io: Io, deps: CliDeps): Promise<number> {
  try {
    const [groupName, commandName, ...rest] = argv;
    if (groupName !== undefined && HELP.includes(groupName)) {
      io.stdout.write(usage());
      return EXIT.ok;
    }
    if (groupName === undefined) throw new UsageError("a command is required");
    const group = GROUPS.find((g) => g.name === groupName);
    if (!group) throw new UsageError(`unknown command "${groupName}"`);
    if (commandName === undefined) throw new UsageError(`"notify ${groupName}" needs a subcommand`);
    if (HELP.includes(commandName) || rest.includes("-h") || rest.includes("--help")) {
      io.stdout.write(usage());
      return EXIT.ok;
    }
    const command = Object.hasOwn(group.commands, commandName) ? group.commands[commandName] : undefined;
    if (!command) throw new UsageError(`unknown command "${groupName} ${commandName}"`);
    await command(rest, io, deps);
    return EXIT.ok;
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr.write(`notify: ${error.message}\n\n${usage()}`);
      return EXIT.usage;
    }
    if (error instanceof ConfigError) {
      io.stderr.write(`notify: ${error.message}\n`);
      return EXIT.config;
    }
    io.stderr.write(`notify: ${describe(error)}\n`);
    return EXIT.failure;
  }
}
