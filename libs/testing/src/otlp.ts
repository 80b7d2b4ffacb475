import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";

/** One span as an OTLP/HTTP JSON export carried it, with its resource's service.name. */
export interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  /** null for a root span. */
  parentSpanId: string | null;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, unknown>;
  links: Array<{ traceId: string; spanId: string }>;
  status: { code?: number; message?: string };
}

/** OTLP's span kinds, as numbers in the JSON encoding. */
export const OTLP_KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const;

export interface OtlpReceiver {
  /** The base URL to give as OTEL_EXPORTER_OTLP_ENDPOINT (spans are posted to <url>/v1/traces). */
  url: string;
  /** Every span received so far, in arrival order. */
  spans: ReceivedSpan[];
  /** Export requests received (a body that was not an ExportTraceServiceRequest counts in `refused`). */
  requests: number;
  refused: number;
  /** Resolves with `pick`'s first non-undefined answer over the spans received, polled until the timeout. */
  waitFor<T>(pick: (spans: ReceivedSpan[]) => T | undefined, timeoutMs?: number, what?: string): Promise<T>;
  close(): Promise<void>;
}

interface AnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string;
  doubleValue?: number;
  arrayValue?: { values?: AnyValue[] };
  kvlistValue?: { values?: KeyValue[] };
}
interface KeyValue {
  key: string;
  value?: AnyValue;
}
interface JsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind?: number;
  attributes?: KeyValue[];
  links?: Array<{ traceId: string; spanId: string }>;
  status?: { code?: number; message?: string };
}
interface ExportRequest {
  resourceSpans?: Array<{ resource?: { attributes?: KeyValue[] }; scopeSpans?: Array<{ spans?: JsonSpan[] }> }>;
}

const anyValue = (value: AnyValue | undefined): unknown => {
  if (value === undefined) return undefined;
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(anyValue);
  if (value.kvlistValue !== undefined) return attributesOf(value.kvlistValue.values);
  return undefined;
};
const attributesOf = (list: KeyValue[] | undefined): Record<string, unknown> =>
  Object.fromEntries((list ?? []).map((kv) => [kv.key, anyValue(kv.value)]));

/** Decodes an OTLP/HTTP JSON ExportTraceServiceRequest into its spans (ids are hex in OTLP JSON). */
export function decodeExport(body: unknown): ReceivedSpan[] {
  const request = body as ExportRequest;
  if (typeof request !== "object" || request === null || !Array.isArray(request.resourceSpans)) {
    throw new Error("not an ExportTraceServiceRequest");
  }
  return request.resourceSpans.flatMap((rs) => {
    const service = String(attributesOf(rs.resource?.attributes)["service.name"] ?? "");
    return (rs.scopeSpans ?? []).flatMap((ss) =>
      (ss.spans ?? []).map((s) => ({
        service,
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId ? s.parentSpanId : null,
        name: s.name,
        kind: s.kind ?? 0,
        attributes: attributesOf(s.attributes),
        links: (s.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
        status: s.status ?? {},
      })),
    );
  });
}

const readBody = async (req: IncomingMessage): Promise<Buffer> => {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  return req.headers["content-encoding"] === "gzip" ? gunzipSync(raw) : raw;
};

/**
 * A trace collector for tests: an OTLP/HTTP receiver on loopback that accepts
 * `POST /v1/traces` in the JSON encoding (what @opentelemetry/exporter-trace-otlp-http sends)
 * and keeps the spans. Protobuf bodies are refused (415). Closed on teardown when given `t`.
 */
export async function startOtlpReceiver(t?: { teardown(fn: () => unknown): void }): Promise<OtlpReceiver> {
  const receiver: OtlpReceiver = {
    url: "",
    spans: [],
    requests: 0,
    refused: 0,
    async waitFor(pick, timeoutMs = 20_000, what = "spans") {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = pick(receiver.spans);
        if (found !== undefined) return found;
        if (Date.now() > deadline) {
          const seen = receiver.spans.map((s) => `${s.service}: ${s.name}`).join(", ");
          throw new Error(`timed out waiting for ${what}; received ${receiver.spans.length}: ${seen}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    close: () => Promise.resolve(),
  };
  const server = createServer((req, res) => {
    if (req.method !== "POST" || req.url !== "/v1/traces") {
      res.writeHead(404).end();
      return;
    }
    if (!String(req.headers["content-type"] ?? "").startsWith("application/json")) {
      receiver.refused++;
      res.writeHead(415).end();
      return;
    }
    readBody(req).then(
      (body) => {
        try {
          receiver.spans.push(...decodeExport(JSON.parse(body.toString("utf8"))));
          receiver.requests++;
          res.writeHead(200, { "content-type": "application/json" }).end("{}");
        } catch {
          receiver.refused++;
          res.writeHead(400).end();
        }
      },
      () => res.writeHead(400).end(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  receiver.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  t?.teardown(() => receiver.close());
  return receiver;
}
