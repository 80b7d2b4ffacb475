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
export const REDACT_CENSOR = "[redacted]";

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
  return config.destination ? pino(options, config.destination as pino.DestinationStream) : pino(options);
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
