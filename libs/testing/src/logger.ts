import { createLogger, type Logger } from "@notify/log";

/** A logger whose lines are kept for assertions (e.g. that a secret never reaches a log). */
export function captureLogger(name = "test"): { log: Logger; lines: () => string[] } {
  const lines: string[] = [];
  const destination = { write: (line: string) => lines.push(line) } as unknown as NodeJS.WritableStream;
  return { log: createLogger({ name, level: "debug", destination }), lines: () => lines };
}
