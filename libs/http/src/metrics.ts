import { monitorEventLoopDelay } from "node:perf_hooks";
import type { Hono } from "hono";
import {
  collectDefaultMetrics,
  Counter as PromCounter,
  Gauge as PromGauge,
  Histogram as PromHistogram,
  Registry,
} from "prom-client";
import type { AppEnv } from "./app.js";

/**
 * Prometheus metrics through prom-client, behind a small interface the apps share. A registry
 * per process (never prom-client's global default one), so tests that start several apps in one
 * process never share series. Misuse (labels other than the declared ones, a counter going down,
 * a name registered twice) throws where it happens, not at scrape time.
 */
export type Labels = Readonly<Record<string, string>>;

export interface Counter {
  inc(labels?: Labels, by?: number): void;
}

export interface Gauge {
  set(labels: Labels, value: number): void;
  inc(labels?: Labels, by?: number): void;
  dec(labels?: Labels, by?: number): void;
}

export interface Histogram {
  observe(labels: Labels, value: number): void;
  /** The series of these labels, to observe into without handling the labels each time. */
  series(labels: Labels): (value: number) => void;
}

/** Seconds, from a millisecond up to a minute: provider calls and waits. */
export const DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60] as const;

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

export class MetricsRegistry {
  /** The prom-client registry, for libraries that register their own collectors. */
  readonly registry = new Registry();
  readonly #collectors: Array<() => void | Promise<void>> = [];
  readonly #collectErrors: Counter;

  constructor() {
    this.#collectErrors = this.counter(
      "metrics_collector_errors_total",
      "Scrapes during which a collector failed; its series kept their previous values",
    );
  }

  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    this.#check(name, labelNames);
    const metric = new PromCounter({ name, help, labelNames, registers: [this.registry] });
    return {
      inc: (labels = {}, by = 1) => {
        if (by < 0) throw new Error(`${name}: a counter only goes up`);
        metric.inc(this.#labels(name, labelNames, labels), by);
      },
    };
  }

  gauge(name: string, help: string, labelNames: readonly string[] = []): Gauge {
    this.#check(name, labelNames);
    const metric = new PromGauge({ name, help, labelNames, registers: [this.registry] });
    return {
      set: (labels, value) => metric.set(this.#labels(name, labelNames, labels), value),
      inc: (labels = {}, by = 1) => metric.inc(this.#labels(name, labelNames, labels), by),
      dec: (labels = {}, by = 1) => metric.dec(this.#labels(name, labelNames, labels), by),
    };
  }

  histogram(
    name: string,
    help: string,
    buckets: readonly number[] = DURATION_BUCKETS,
    labelNames: readonly string[] = [],
  ): Histogram {
    if (labelNames.includes("le")) throw new Error(`${name}: "le" is reserved for buckets`);
    this.#check(name, labelNames);
    const metric = new PromHistogram({
      name,
      help,
      labelNames,
      buckets: [...buckets].sort((a, b) => a - b),
      registers: [this.registry],
    });
    return {
      observe: (labels, value) => metric.observe(this.#labels(name, labelNames, labels), value),
      series: (labels) => {
        const child = metric.labels(this.#labels(name, labelNames, labels));
        return (value) => child.observe(value);
      },
    };
  }

  /** Runs before every scrape: for values read from elsewhere (queue depth, breaker state). */
  collect(collector: () => void | Promise<void>): void {
    this.#collectors.push(collector);
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  async render(): Promise<string> {
    const results = await Promise.allSettled(this.#collectors.map(async (collect) => collect()));
    for (const result of results) if (result.status === "rejected") this.#collectErrors.inc();
    return this.registry.metrics();
  }

  #check(name: string, labelNames: readonly string[]): void {
    if (!NAME.test(name)) throw new Error(`invalid metric name "${name}"`);
    for (const label of labelNames) {
      if (!LABEL.test(label) || label.startsWith("__")) throw new Error(`${name}: invalid label "${label}"`);
    }
    if (this.registry.getSingleMetric(name) !== undefined) throw new Error(`metric "${name}" registered twice`);
  }

  /** Exactly the declared labels, in their declared order (the order they are rendered in). */
  #labels(name: string, labelNames: readonly string[], labels: Labels): Record<string, string> {
    const given = Object.keys(labels);
    if (given.length !== labelNames.length || !labelNames.every((l) => Object.hasOwn(labels, l))) {
      throw new Error(`${name}: labels must be exactly ${labelNames.join(", ") || "(none)"}`);
    }
    const ordered: Record<string, string> = {};
    for (const label of labelNames) ordered[label] = labels[label] as string;
    return ordered;
  }
}

/**
 * How often the event loop's delay is sampled, in ms. prom-client's default (10) wakes an idle
 * process a hundred times a second, and every wake-up costs CPU in an app that has nothing to do.
 * Sampled ten times a second, a sustained lag still shows in the percentiles; a single stall
 * shorter than this may fall between two samples (the max series then misses it).
 */
const EVENT_LOOP_SAMPLE_MS = 100;

/**
 * The event loop's delay (`nodejs_eventloop_lag_{min,max,mean,stddev,p50,p90,p99}_seconds`, the
 * names prom-client gives them), sampled every EVENT_LOOP_SAMPLE_MS. Node's monitor records the
 * whole time between two of its ticks, the sampling interval included (prom-client passes that
 * on: an idle process reads its 10 ms); the interval is taken off here, so an idle app reads
 * about 0 whatever the sampling. Each scrape reads what happened since the one before.
 */
function eventLoopDelay(registry: Registry): void {
  const histogram = monitorEventLoopDelay({ resolution: EVENT_LOOP_SAMPLE_MS });
  histogram.enable();
  const delay = (nanoseconds: number) => Math.max(0, nanoseconds - EVENT_LOOP_SAMPLE_MS * 1e6) / 1e9;
  const series: Array<[name: string, help: string, read: () => number]> = [
    ["min", "The minimum recorded event loop delay.", () => delay(histogram.min)],
    ["max", "The maximum recorded event loop delay.", () => delay(histogram.max)],
    ["mean", "The mean of the recorded event loop delays.", () => delay(histogram.mean)],
    ["stddev", "The standard deviation of the recorded event loop delays.", () => histogram.stddev / 1e9],
    ["p50", "The 50th percentile of the recorded event loop delays.", () => delay(histogram.percentile(50))],
    ["p90", "The 90th percentile of the recorded event loop delays.", () => delay(histogram.percentile(90))],
    ["p99", "The 99th percentile of the recorded event loop delays.", () => delay(histogram.percentile(99))],
  ];
  const gauges: PromGauge[] = [];
  const collect = () => {
    if (histogram.count > 0) for (const [i, [, , read]] of series.entries()) gauges[i]?.set(read());
    histogram.reset();
  };
  for (const [i, [name, help]] of series.entries()) {
    const full = `nodejs_eventloop_lag_${name}_seconds`;
    registry.removeSingleMetric(full);
    // The first series' collect sets them all (a registry collects in the order of registration),
    // then starts the next window.
    gauges.push(new PromGauge({ name: full, help, registers: [registry], ...(i === 0 ? { collect } : {}) }));
  }
}

/**
 * A registry with the series every app exposes: the app's name, and prom-client's process and
 * Node.js series (CPU, resident memory, heap, event-loop lag, start time).
 */
export function createMetrics(app: string): MetricsRegistry {
  const metrics = new MetricsRegistry();
  metrics.gauge("notify_app_info", "Always 1; the app label names the process", ["app"]).set({ app }, 1);
  // prom-client's own delay monitor cannot be left out: sampled once a second, its series are
  // replaced by eventLoopDelay's.
  collectDefaultMetrics({ register: metrics.registry, eventLoopMonitoringPrecision: 1000 });
  eventLoopDelay(metrics.registry);
  return metrics;
}

export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** Seconds a request took, by route pattern (never the raw path: ids would explode the series). */
export const REQUEST_DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface RequestMetrics {
  observe(method: string, route: string, status: number, seconds: number): void;
}

const requestHistograms = new WeakMap<MetricsRegistry, RequestMetrics>();

/**
 * The request-duration histogram of a registry: one per registry, shared by every server that
 * reports to it (an app rebuilt in a test, a second listener), as a metric is registered once.
 */
export function requestMetrics(metrics: MetricsRegistry): RequestMetrics {
  const known = requestHistograms.get(metrics);
  if (known !== undefined) return known;
  const histogram = metrics.histogram(
    "http_request_duration_seconds",
    "HTTP requests by method, route pattern and status, seconds from arrival to answer",
    REQUEST_DURATION_BUCKETS,
    ["method", "route", "status"],
  );
  // Each (method, route pattern, status) series once bound: a handful per route, and this runs on
  // every request. Patterns, not paths, so the map stays as small as the series themselves.
  const bound = new Map<string, (seconds: number) => void>();
  const made: RequestMetrics = {
    observe: (method, route, status, seconds) => {
      const key = `${method} ${status} ${route}`;
      let observe = bound.get(key);
      if (observe === undefined) {
        observe = histogram.series({ method, route, status: String(status) });
        bound.set(key, observe);
      }
      observe(seconds);
    },
  };
  requestHistograms.set(metrics, made);
  return made;
}

/**
 * GET /metrics. Like /healthz it carries no credentials: serve it on a port that only the
 * scraper reaches. Series carry no personal data (no user or notification ids in labels).
 */
export function mountMetrics(app: Hono<AppEnv>, registry: MetricsRegistry): void {
  app.get("/metrics", async (c) => c.body(await registry.render(), 200, { "content-type": METRICS_CONTENT_TYPE }));
}
