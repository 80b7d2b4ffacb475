import { memoryUsage, cpuUsage as processCpuUsage } from "node:process";
import type { Hono } from "hono";
import type { AppEnv } from "./index.js";

/**
 * Prometheus metrics in the text exposition format (version 0.0.4). A registry per process,
 * never a module-level default one (STYLE: no singletons), so tests and several apps in one
 * process never share series. Written here rather than taken from prom-client: what the apps
 * need (counters, gauges, fixed-bucket histograms, collectors run at scrape time) is a page of
 * code, and prom-client's global default registry is exactly the singleton the house rules ban.
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
}

/** Seconds, from a millisecond up to a minute: provider calls and waits. */
export const DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60] as const;

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
const escapeHelp = (text: string) => text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");

function formatValue(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Number.POSITIVE_INFINITY) return "+Inf";
  if (value === Number.NEGATIVE_INFINITY) return "-Inf";
  return String(value);
}

interface Family {
  name: string;
  help: string;
  type: "counter" | "gauge" | "histogram";
  labelNames: readonly string[];
  render(lines: string[]): void;
}

function labelText(labelNames: readonly string[], values: readonly string[], extra = ""): string {
  const pairs = labelNames.map((name, i) => `${name}="${escapeLabel(values[i] ?? "")}"`);
  if (extra) pairs.push(extra);
  return pairs.length > 0 ? `{${pairs.join(",")}}` : "";
}

export class MetricsRegistry {
  readonly #families = new Map<string, Family>();
  readonly #collectors: Array<() => void | Promise<void>> = [];
  readonly #collectErrors: Counter;

  constructor() {
    this.#collectErrors = this.counter(
      "metrics_collector_errors_total",
      "Scrapes during which a collector failed; its series kept their previous values",
    );
  }

  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    const series = this.#series(name, help, "counter", labelNames);
    return {
      inc: (labels = {}, by = 1) => {
        if (by < 0) throw new Error(`${name}: a counter only goes up`);
        const key = this.#key(name, labelNames, labels);
        series.set(key, (series.get(key) ?? 0) + by);
      },
    };
  }

  gauge(name: string, help: string, labelNames: readonly string[] = []): Gauge {
    const series = this.#series(name, help, "gauge", labelNames);
    const add = (labels: Labels, by: number) => {
      const key = this.#key(name, labelNames, labels);
      series.set(key, (series.get(key) ?? 0) + by);
    };
    return {
      set: (labels, value) => series.set(this.#key(name, labelNames, labels), value),
      inc: (labels = {}, by = 1) => add(labels, by),
      dec: (labels = {}, by = 1) => add(labels, -by),
    };
  }

  histogram(
    name: string,
    help: string,
    buckets: readonly number[] = DURATION_BUCKETS,
    labelNames: readonly string[] = [],
  ): Histogram {
    if (labelNames.includes("le")) throw new Error(`${name}: "le" is reserved for buckets`);
    const bounds = [...buckets].sort((a, b) => a - b);
    const series = new Map<string, { counts: number[]; sum: number; count: number }>();
    this.#register({
      name,
      help,
      type: "histogram",
      labelNames,
      render: (lines) => {
        for (const [key, h] of series) {
          const values = JSON.parse(key) as string[];
          let cumulative = 0;
          bounds.forEach((bound, i) => {
            cumulative += h.counts[i] ?? 0;
            lines.push(`${name}_bucket${labelText(labelNames, values, `le="${formatValue(bound)}"`)} ${cumulative}`);
          });
          lines.push(`${name}_bucket${labelText(labelNames, values, 'le="+Inf"')} ${h.count}`);
          lines.push(`${name}_sum${labelText(labelNames, values)} ${formatValue(h.sum)}`);
          lines.push(`${name}_count${labelText(labelNames, values)} ${h.count}`);
        }
      },
    });
    return {
      observe: (labels, value) => {
        const key = this.#key(name, labelNames, labels);
        let h = series.get(key);
        if (!h) {
          h = { counts: bounds.map(() => 0), sum: 0, count: 0 };
          series.set(key, h);
        }
        const i = bounds.findIndex((bound) => value <= bound);
        if (i >= 0) h.counts[i] = (h.counts[i] ?? 0) + 1;
        h.sum += value;
        h.count += 1;
      },
    };
  }

  /** Runs before every scrape: for values read from elsewhere (queue depth, breaker state). */
  collect(collector: () => void | Promise<void>): void {
    this.#collectors.push(collector);
  }

  async render(): Promise<string> {
    const results = await Promise.allSettled(this.#collectors.map(async (collect) => collect()));
    for (const result of results) if (result.status === "rejected") this.#collectErrors.inc();
    const lines: string[] = [];
    for (const family of this.#families.values()) {
      lines.push(`# HELP ${family.name} ${escapeHelp(family.help)}`, `# TYPE ${family.name} ${family.type}`);
      family.render(lines);
    }
    return `${lines.join("\n")}\n`;
  }

  #series(name: string, help: string, type: "counter" | "gauge", labelNames: readonly string[]) {
    const series = new Map<string, number>();
    this.#register({
      name,
      help,
      type,
      labelNames,
      render: (lines) => {
        for (const [key, value] of series) {
          lines.push(`${name}${labelText(labelNames, JSON.parse(key) as string[])} ${formatValue(value)}`);
        }
      },
    });
    return series;
  }

  #register(family: Family) {
    if (!NAME.test(family.name)) throw new Error(`invalid metric name "${family.name}"`);
    for (const label of family.labelNames) {
      if (!LABEL.test(label) || label.startsWith("__")) throw new Error(`${family.name}: invalid label "${label}"`);
    }
    if (this.#families.has(family.name)) throw new Error(`metric "${family.name}" registered twice`);
    this.#families.set(family.name, family);
  }

  #key(name: string, labelNames: readonly string[], labels: Labels): string {
    const given = Object.keys(labels);
    if (given.length !== labelNames.length || !labelNames.every((l) => Object.hasOwn(labels, l))) {
      throw new Error(`${name}: labels must be exactly ${labelNames.join(", ") || "(none)"}`);
    }
    return JSON.stringify(labelNames.map((l) => labels[l]));
  }
}

/**
 * A registry with the process series every app exposes: the app's name, start time, CPU,
 * resident memory and heap.
 */
export function createMetrics(app: string): MetricsRegistry {
  const registry = new MetricsRegistry();
  registry.gauge("notify_app_info", "Always 1; the app label names the process", ["app"]).set({ app }, 1);
  const startTime = registry.gauge("process_start_time_seconds", "Start time of the process, unix seconds");
  startTime.set({}, Math.round(Date.now() / 1000 - process.uptime()));
  const cpu = registry.counter("process_cpu_seconds_total", "User and system CPU time spent, seconds");
  let cpuSeen = 0;
  const resident = registry.gauge("process_resident_memory_bytes", "Resident memory size, bytes");
  const heap = registry.gauge("nodejs_heap_used_bytes", "V8 heap in use, bytes");
  registry.collect(() => {
    const usage = processCpuUsage();
    const seconds = (usage.user + usage.system) / 1e6;
    cpu.inc({}, Math.max(0, seconds - cpuSeen));
    cpuSeen = Math.max(cpuSeen, seconds);
    const memory = memoryUsage();
    resident.set({}, memory.rss);
    heap.set({}, memory.heapUsed);
  });
  return registry;
}

export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/**
 * GET /metrics. Like /healthz it carries no credentials: serve it on a port that only the
 * scraper reaches. Series carry no personal data (no user or notification ids in labels).
 */
export function mountMetrics(app: Hono<AppEnv>, registry: MetricsRegistry): void {
  app.get("/metrics", async (c) => c.body(await registry.render(), 200, { "content-type": METRICS_CONTENT_TYPE }));
}
