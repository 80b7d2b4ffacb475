import {
  type Attributes,
  type Context,
  context,
  type Link,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type TextMapSetter,
  type Tracer,
  trace,
} from "@opentelemetry/api";

export type { Attributes, Context, Link, Span };
export { SpanKind, SpanStatusCode };

/** The OTEL_* settings the apps' config schemas read (libs/config `common`). */
export interface TelemetrySettings {
  OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined;
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string | undefined;
  OTEL_SERVICE_NAME?: string | undefined;
  OTEL_SDK_DISABLED?: boolean | undefined;
}

export interface Telemetry {
  /** Whether spans are recorded and exported. */
  readonly enabled: boolean;
  /** Where spans are sent (OTLP/HTTP JSON), when enabled. */
  readonly endpoint: string | null;
  /** Exports the spans still buffered and unregisters the SDK. */
  shutdown(): Promise<void>;
}

/**
 * The tracer while the SDK is registered; undefined when tracing is off. The OpenTelemetry API
 * is process-global by design (a tracer provider, a context manager and a propagator per
 * process), so this mirrors it: every helper below checks it first and does nothing more when
 * tracing is off.
 */
let active: Tracer | undefined;

/** Whether this process records spans (startTelemetry found an endpoint). */
export const tracingOn = (): boolean => active !== undefined;

/** The OTLP/HTTP traces URL the settings name, or null: tracing off. */
export function tracesEndpoint(settings: TelemetrySettings): string | null {
  if (settings.OTEL_SDK_DISABLED === true) return null;
  const traces = settings.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  if (traces !== undefined && traces !== "") return traces;
  const base = settings.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (base === undefined || base === "") return null;
  // The spec: the signal's path is appended to the base endpoint.
  return `${base.replace(/\/+$/, "")}/v1/traces`;
}

const OFF: Telemetry = { enabled: false, endpoint: null, shutdown: async () => {} };

/**
 * Starts tracing for one app when an OTLP endpoint is configured: a tracer provider batching
 * spans to the OTLP/HTTP (JSON) exporter, resource `service.name` = OTEL_SERVICE_NAME or
 * `notify-<service>`, the AsyncLocalStorage context manager and the W3C trace-context
 * propagator, all registered globally. Without an endpoint (or with OTEL_SDK_DISABLED=true) it
 * registers nothing and loads none of the SDK: the API's no-op tracer stays, and every helper
 * here returns at its first check. Call it before anything that logs or handles work.
 */
export async function startTelemetry(options: { service: string; settings: TelemetrySettings }): Promise<Telemetry> {
  const url = tracesEndpoint(options.settings);
  if (url === null) return OFF;
  if (active !== undefined) throw new Error("telemetry is already started in this process");
  // Loaded only here: a process without tracing never imports the SDK.
  const [{ BasicTracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, resources, core, hooks] =
    await Promise.all([
      import("@opentelemetry/sdk-trace-base"),
      import("@opentelemetry/exporter-trace-otlp-http"),
      import("@opentelemetry/resources"),
      import("@opentelemetry/core"),
      import("@opentelemetry/context-async-hooks"),
    ]);
  const serviceName = options.settings.OTEL_SERVICE_NAME || `notify-${options.service}`;
  const provider = new BasicTracerProvider({
    resource: resources.resourceFromAttributes({ "service.name": serviceName }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url }))],
  });
  const contextManager = new hooks.AsyncLocalStorageContextManager().enable();
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new core.W3CTraceContextPropagator());
  active = provider.getTracer("notify");
  let stopped: Promise<void> | undefined;
  return {
    enabled: true,
    endpoint: url,
    shutdown() {
      stopped ??= (async () => {
        active = undefined;
        try {
          await provider.shutdown();
        } finally {
          trace.disable();
          context.disable();
          propagation.disable();
        }
      })();
      return stopped;
    },
  };
}

// --- W3C traceparent ---------------------------------------------------------------------------

/** The active span's W3C traceparent, when tracing is on and a span is active. */
export function activeTraceparent(): string | undefined {
  if (active === undefined) return undefined;
  const span = trace.getSpan(context.active());
  if (span === undefined) return undefined;
  const { traceId, spanId, traceFlags } = span.spanContext();
  return `00-${traceId}-${spanId}-${traceFlags.toString(16).padStart(2, "0")}`;
}

/** The active context, when tracing is on (to carry into work done outside this async context). */
export function activeContext(): Context | undefined {
  return active === undefined ? undefined : context.active();
}

const recordGetter: TextMapGetter<Record<string, string>> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key],
};

/**
 * A context whose parent is the span a stored traceparent names (ROOT when tracing is off or
 * there is none): for work resumed from the database (fallbacks, redrives, receipts).
 */
export function contextOf(traceparent: string | null | undefined): Context {
  if (active === undefined || traceparent === null || traceparent === undefined) return ROOT_CONTEXT;
  return propagation.extract(ROOT_CONTEXT, { traceparent }, recordGetter);
}

/**
 * Runs `fn` in `ctx` (a context from activeContext or contextOf); with tracing off, or no
 * context, it only calls `fn`.
 */
export function withContext<T>(ctx: Context | undefined, fn: () => T): T {
  return ctx === undefined || active === undefined ? fn() : context.with(ctx, fn);
}

// --- Carriers (NATS and HTTP headers) -----------------------------------------------------------

/** Something headers can be set on and read from: NATS MsgHdrs, fetch Headers. */
export interface HeaderCarrier {
  get(key: string): string | null | undefined;
  set(key: string, value: string): void;
}

const setter: TextMapSetter<HeaderCarrier> = { set: (carrier, key, value) => carrier.set(key, value) };
const getter: TextMapGetter<HeaderCarrier> = {
  keys: () => ["traceparent", "tracestate"],
  get: (carrier, key) => carrier.get(key) ?? undefined,
};

/** Writes the active (or given) context's `traceparent` and `tracestate`; nothing when tracing is off. */
export function injectHeaders(carrier: HeaderCarrier, ctx?: Context): void {
  if (active === undefined) return;
  propagation.inject(ctx ?? context.active(), carrier, setter);
}

/** The context a carrier's `traceparent` names, over ROOT (a new trace when it names none). */
export function extractHeaders(carrier: HeaderCarrier | undefined): Context {
  if (active === undefined || carrier === undefined) return ROOT_CONTEXT;
  return propagation.extract(ROOT_CONTEXT, carrier, getter);
}

// --- Spans --------------------------------------------------------------------------------------

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  /** The parent context; the active one when unset. */
  parent?: Context;
  links?: Link[];
  /** When the work began (epoch ms), for a span recorded once the work is done; now when unset. */
  startTime?: number;
}

/**
 * Runs `fn` inside a new active span, ended when `fn` settles; a thrown error is recorded on it
 * and rethrown. With tracing off it only calls `fn` (with no span): nothing is allocated.
 */
export function withSpan<T>(
  name: string,
  options: SpanOptions,
  fn: (span: Span | undefined) => Promise<T>,
): Promise<T> {
  const tracer = active;
  if (tracer === undefined) return fn(undefined);
  const parent = options.parent ?? context.active();
  const span = tracer.startSpan(
    name,
    {
      ...(options.kind === undefined ? {} : { kind: options.kind }),
      ...(options.attributes === undefined ? {} : { attributes: options.attributes }),
      ...(options.links === undefined ? {} : { links: options.links }),
      ...(options.startTime === undefined ? {} : { startTime: options.startTime }),
    },
    parent,
  );
  return context.with(trace.setSpan(parent, span), async () => {
    try {
      return await fn(span);
    } catch (error) {
      failSpan(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/** Marks a span failed with what was thrown. */
export function failSpan(span: Span, error: unknown): void {
  span.recordException(error instanceof Error ? error : String(error));
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
}

/** A link to the active span (e.g. from a receipt's span to the webhook request that carried it). */
export function activeLink(): Link[] | undefined {
  if (active === undefined) return undefined;
  const span = trace.getSpan(context.active());
  return span === undefined ? undefined : [{ context: span.spanContext() }];
}

// --- Log correlation ----------------------------------------------------------------------------

/** Returned while no span is active; never mutated (see libs/log's merge strategy). */
export const NO_TRACE_FIELDS: Readonly<Record<string, never>> = Object.freeze({});

/** `trace_id` and `span_id` of the active span, for a log line; NO_TRACE_FIELDS when there is none. */
export function traceLogFields(): Record<string, string> {
  if (active === undefined) return NO_TRACE_FIELDS;
  const span = trace.getSpan(context.active());
  if (span === undefined) return NO_TRACE_FIELDS;
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}
