import type { Logger } from "@notify/log";

type Bindings = Record<string, unknown>;
type Level = "fatal" | "error" | "warn" | "info" | "debug" | "trace";
type LogFn = (obj: unknown, msg?: string) => void;

/** What request handlers log with: the levels and child, bound to the request's fields. */
export type RequestLogger = Record<Level, LogFn> & {
  child(bindings: Bindings): RequestLogger;
  /** The fields every line of this logger carries (the request id, then what children added). */
  bindings(): Bindings;
};

/**
 * A per-request logger that builds its pino child only when something is logged at an
 * enabled level. Most requests log nothing below the configured level, so a pino child per
 * request (two with authentication) would be work thrown away on ingest's hot path; so would a
 * set of closures per request, hence one small object with its methods on the prototype.
 */
class LazyLogger implements RequestLogger {
  #child: Logger | undefined;
  // A child's own fields stay apart from its parent's until something is logged: merging them
  // for every authenticated request would cost an object that is rarely used.
  constructor(
    private readonly root: Logger,
    private readonly own: Bindings,
    private readonly more?: Bindings,
  ) {}
  #merged(): Bindings {
    return this.more === undefined ? this.own : { ...this.own, ...this.more };
  }
  #log(level: Level, obj: unknown, msg?: string): void {
    if (!this.root.isLevelEnabled(level)) return;
    this.#child ??= this.root.child(this.#merged());
    this.#child[level](obj as object, msg);
  }
  fatal(obj: unknown, msg?: string) {
    this.#log("fatal", obj, msg);
  }
  error(obj: unknown, msg?: string) {
    this.#log("error", obj, msg);
  }
  warn(obj: unknown, msg?: string) {
    this.#log("warn", obj, msg);
  }
  info(obj: unknown, msg?: string) {
    this.#log("info", obj, msg);
  }
  debug(obj: unknown, msg?: string) {
    this.#log("debug", obj, msg);
  }
  trace(obj: unknown, msg?: string) {
    this.#log("trace", obj, msg);
  }
  child(more: Bindings): RequestLogger {
    return new LazyLogger(this.root, this.#merged(), more);
  }
  bindings(): Bindings {
    return this.#merged();
  }
}

export function requestLogger(root: Logger, bindings: Bindings): RequestLogger {
  return new LazyLogger(root, bindings);
}
