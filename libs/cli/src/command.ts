import { parseArgs } from "node:util";
import type { Bus } from "@notify/bus";
import type { Database } from "@notify/db";

export interface Output {
  write(text: string): unknown;
}

/** Where a command writes: data on stdout, warnings and errors on stderr. */
export interface Io {
  stdout: Output;
  stderr: Output;
}

export interface CliDeps {
  database: Database;
  /** NATS, connected on first use: only the dlq commands need it. */
  bus?: () => Promise<Bus>;
  /** Categories no preference suppresses (CRITICAL_CATEGORIES), for the replay's preference check. */
  criticalCategories?: readonly string[];
  /** The environment's settings a command reads besides (retention: ARCHIVE_*); none when unset. */
  env?: Record<string, string | undefined>;
}

/** A subcommand: gets its own arguments (after `notify <group> <name>`); throws to fail. */
export type Command = (argv: string[], io: Io, deps: CliDeps) => Promise<void>;

/** `notify <name> <subcommand> ...`: a group of subcommands and its lines of the usage text. */
export interface CommandGroup {
  name: string;
  usage: string;
  commands: Record<string, Command>;
}

/** Bad invocation: exit status 2 with the usage text. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

export interface OptionSpec {
  type: "string" | "boolean";
  multiple?: boolean;
}

type Value<O extends OptionSpec> = O["type"] extends "string" ? string : boolean;
export type OptionValues<O extends Record<string, OptionSpec>> = {
  [K in keyof O]?: O[K]["multiple"] extends true ? Value<O[K]>[] : Value<O[K]>;
};

/**
 * node:util parseArgs in strict mode, with its errors, missing and surplus positionals turned
 * into usage errors. `positionals` names the required ones, e.g. ["ID"]; a last name ending in
 * "..." takes any number, none included (e.g. ["SEQ..."]).
 */
export function parseOptions<const O extends Record<string, OptionSpec>>(
  argv: string[],
  options: O,
  positionals: string[],
): { values: OptionValues<O>; positionals: string[] } {
  let parsed: { values: unknown; positionals: string[] };
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const variadic = positionals.at(-1)?.endsWith("...") === true;
  const required = variadic ? positionals.slice(0, -1) : positionals;
  const missing = required[parsed.positionals.length];
  if (missing !== undefined) throw new UsageError(`${missing} is required`);
  const surplus = variadic ? undefined : parsed.positionals[positionals.length];
  if (surplus !== undefined) throw new UsageError(`unexpected argument "${surplus}"`);
  return { values: parsed.values as OptionValues<O>, positionals: parsed.positionals };
}
