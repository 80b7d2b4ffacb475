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

export interface LogConfig {
  name: string;
  level: string;
  /** Extra options for tests (e.g. a destination stream). */
  options?: LoggerOptions;
  destination?: NodeJS.WritableStream;
}

/**
 * How long an info or debug line may wait in memory before it is written, and how many bytes
 * wait at most. Written one by one, the access log's lines cost a system call each, a large
 * share of a busy app's CPU; written in batches, a few per hundred requests.
 */
export const LOG_FLUSH_MS = 100;
export const LOG_BUFFER_BYTES = 4096;

/** pino's level number for warn: a line at or above it is written at once. */
const WARN = 40;

/** What writes each batched destination's queued lines as the process exits. */
const exitFlushes = new Set<() => void>();

/**
 * stdout, written synchronously in batches: lines below warn wait up to LOG_FLUSH_MS or until
 * LOG_BUFFER_BYTES are queued; a warning or an error is written at once with everything queued
 * before it, so the line that explains a crash is out before the crash. On exit pino writes
 * what is queued; a process killed outright loses at most LOG_FLUSH_MS of info lines.
 * Synchronous writes keep the lines in order whoever writes them.
 */
function bufferedStdout(): { stream: pino.DestinationStream; written: (level: number) => void } {
  const stream = pino.destination({ dest: 1, sync: true, minLength: LOG_BUFFER_BYTES });
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    timer = undefined;
    try {
      stream.flushSync();
    } catch {
      // stdout closed: there is nowhere to write the lines to.
    }
  };
  // pino flushes only its asynchronous destinations on exit.
  if (exitFlushes.size === 0)
    process.once("exit", () => {
      for (const f of exitFlushes) f();
    });
  exitFlushes.add(flush);
  const written = (level: number) => {
    if (level >= WARN) {
      if (timer !== undefined) clearTimeout(timer);
      flush();
    } else if (timer === undefined) {
      timer = setTimeout(flush, LOG_FLUSH_MS);
      timer.unref();
    }
  };
  return { stream, written };
}

export function createLogger(config: LogConfig): Logger {
  const stdout = config.destination ? undefined : bufferedStdout();
  const options: LoggerOptions = {
    name: config.name,
    level: config.level,
    redact: { paths: REDACT_PATHS, censor: "[redacted]" },
    base: { app: config.name },
    timestamp: pino.stdTimeFunctions.isoTime,
    // Every line logged while a span is active carries its trace_id and span_id (nothing when
    // tracing is off or no span is active). pino's default merge writes the line's fields into
    // the mixin's object: the shared empty one must not be written to, so it is passed over.
    mixin: traceLogFields,
    mixinMergeStrategy: (line: object, fields: object) =>
      fields === NO_TRACE_FIELDS ? line : Object.assign(fields, line),
    ...(stdout
      ? {
          hooks: {
            logMethod(args, method, level) {
              method.apply(this, args);
              stdout.written(level);
            },
          },
        }
      : {}),
    ...config.options,
  };
  return pino(options, config.destination ? (config.destination as pino.DestinationStream) : stdout?.stream);
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
