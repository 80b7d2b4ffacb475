import { NO_TRACE_FIELDS, traceLogFields } from "@notify/telemetry";
import { type Logger, type LoggerOptions, pino } from "pino";

export type { Logger };

/**
 * Paths redacted from every log line. Keys, tokens and passwords never reach a log, whatever
 * object a caller logs; the request logger also never logs query strings (a key there must
 * not leak, see the auth rules).
 */
export const REDACT_PATHS = [
  "apiKey",
  "api_key",
  "key",
  "token",
  "password",
  "secret",
  "authorization",
  "Authorization",
  "*.apiKey",
  "*.api_key",
  "*.token",
  "*.password",
  "*.secret",
  "*.authorization",
  "headers.authorization",
  "headers['x-api-key']",
  "req.headers.authorization",
  "req.headers['x-api-key']",
  "config.SENDGRID_API_KEY",
  "config.DATABASE_URL",
  "config.PLIVO_AUTH_TOKEN",
  "config.VAPID_PRIVATE_KEY",
  "config.SMTP_URL",
];

/** What a redacted value is logged as. */
const REDACT_CENSOR = "[redacted]";

export interface LogConfig {
  name: string;
  level: string;
  /** Extra options for tests (e.g. a destination stream). */
  options?: LoggerOptions;
  destination?: NodeJS.WritableStream;
}

export function createLogger(config: LogConfig): Logger {
  const options: LoggerOptions = {
    name: config.name,
    level: config.level,
    redact: { paths: REDACT_PATHS, censor: REDACT_CENSOR },
    base: { app: config.name },
    timestamp: pino.stdTimeFunctions.isoTime,
    // Every line logged while a span is active carries its trace_id and span_id (nothing when
    // tracing is off or no span is active). pino's default merge writes the line's fields into
    // the mixin's object: the shared empty one must not be written to, so it is passed over.
    mixin: traceLogFields,
    mixinMergeStrategy: (line: object, fields: object) =>
      fields === NO_TRACE_FIELDS ? line : Object.assign(fields, line),
    ...config.options,
  };
  return pino(options, (config.destination as pino.DestinationStream | undefined) ?? standardOutput());
}

let stdout: pino.DestinationStream | undefined;

/**
 * Standard output, one write(2) per line as it is logged (what Node.js's own stdout does on a
 * pipe on Linux). pino's default hands each write to libuv's thread pool and back, which under a
 * steady rate of a few lines a millisecond still makes a write per line and costs about twice
 * the CPU a line (20 against 40 µs over an idle process, a piped reader on this project's 2-core
 * machine); a line is also never lost in a buffer when the process is killed. A reader that stops
 * reading holds the process up at its next line, as it would any synchronous writer.
 */
const standardOutput = (): pino.DestinationStream => {
  stdout ??= pino.destination({ dest: 1, sync: true });
  return stdout;
};

const TOP_LEVEL_PATHS = REDACT_PATHS.filter((path) => !/[.[]/.test(path));
const leanChildren = new WeakMap<Logger, Logger>();

/**
 * A child of `log` for a hot path's lines whose fields are all set by the code (ids, counts,
 * statuses, durations: an access line, a delivery's wide event), never an object taken from a
 * request, a provider or an error. It redacts the top-level keys only, a lookup per field, where
 * the full set also walks every field for its nested paths; made once per logger, where a child
 * per request or message would serialize its bindings each time. Lines carrying anything else
 * keep `log` and all of the redaction.
 */
export function leanLogger(log: Logger): Logger {
  let lean = leanChildren.get(log);
  if (lean === undefined) {
    lean = log.child({}, { redact: { paths: TOP_LEVEL_PATHS, censor: REDACT_CENSOR } });
    leanChildren.set(log, lean);
  }
  return lean;
}

/** Masks the password of a connection URL so it can be logged. */
export function safeUrl(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.password) url.password = "***";
    return url.toString();
  } catch {
    return "[unparseable url]";
  }
}
