import fc from "fast-check";
import t from "tap";
import { createSseDecoder, createSseParser, type SseEvent } from "../src/sse.js";

// The event-stream parser over bytes as the network hands them over: however a valid stream is
// cut into chunks (inside a CRLF, inside a multi-byte UTF-8 character), the same events come out,
// the ones the stream holds.

/** A value of one field line: any Unicode text without the line ends and NUL. */
const fieldValue = fc.string({ unit: "grapheme", maxLength: 12 }).map((s) => s.replace(/[\r\n\0]/g, "·"));

interface Block {
  event?: string;
  id?: string;
  data: string[];
  /** Lines the parser must ignore: comments, retry, unknown fields. */
  noise: string[];
}

const block: fc.Arbitrary<Block> = fc.record(
  {
    event: fieldValue.filter((s) => s !== ""),
    id: fieldValue,
    data: fc.array(fieldValue, { maxLength: 3 }),
    noise: fc.array(
      fc.oneof(
        fieldValue.map((s) => `:${s}`),
        fc.constant("retry: 3000"),
        fc.constant("extra: x"),
      ),
      {
        maxLength: 2,
      },
    ),
  },
  { requiredKeys: ["data", "noise"] },
);

/** The events a browser's EventSource dispatches for these blocks. */
function expected(blocks: Block[]): SseEvent[] {
  const out: SseEvent[] = [];
  let lastId = "";
  for (const b of blocks) {
    if (b.id !== undefined) lastId = b.id;
    if (b.data.length > 0) out.push({ event: b.event ?? "message", data: b.data.join("\n"), id: lastId });
  }
  return out;
}

function serialize(blocks: Block[], eol: string): string {
  return blocks
    .map((b) => {
      const lines = [
        ...b.noise,
        ...(b.event === undefined ? [] : [`event: ${b.event}`]),
        ...(b.id === undefined ? [] : [`id: ${b.id}`]),
        ...b.data.map((d) => `data: ${d}`),
      ];
      return lines.map((line) => `${line}${eol}`).join("") + eol;
    })
    .join("");
}

/** `bytes` cut at the given offsets (any, sorted and deduplicated here). */
function chunks(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const out: Uint8Array[] = [];
  let from = 0;
  for (const to of [...at, bytes.length]) {
    out.push(bytes.subarray(from, to));
    from = to;
  }
  return out;
}

function decodeAll(parts: Uint8Array[]): SseEvent[] {
  const events: SseEvent[] = [];
  const decoder = createSseDecoder({ onEvent: (e) => events.push(e) });
  for (const part of parts) decoder.push(part);
  return events;
}

t.test("any cut of a valid stream's bytes gives its events, in order", async (t) => {
  fc.assert(
    fc.property(
      fc.array(block, { maxLength: 8 }),
      fc.constantFrom("\n", "\r\n", "\r"),
      fc.boolean(),
      fc.array(fc.nat(), { maxLength: 20 }),
      (blocks, eol, bom, cuts) => {
        const text = (bom ? "\uFEFF" : "") + serialize(blocks, eol);
        const bytes = new TextEncoder().encode(text);
        t.same(decodeAll(chunks(bytes, cuts)), expected(blocks));
      },
    ),
    { numRuns: 500 },
  );
});

t.test("byte by byte, a character of two, three and four bytes is whole", async (t) => {
  const text = 'event: notification\nid: 7\ndata: {"body":"é 漢 😀"}\n\n';
  const bytes = new TextEncoder().encode(text);
  const parts = [...bytes].map((b) => Uint8Array.of(b));
  t.same(decodeAll(parts), [{ event: "notification", data: '{"body":"é 漢 😀"}', id: "7" }]);
});

t.test("the stream's own shapes: ready, a keep-alive comment, an item, token_ended", async (t) => {
  const events: SseEvent[] = [];
  const comments: string[] = [];
  const parser = createSseParser({ onEvent: (e) => events.push(e), onComment: (c) => comments.push(c) });
  parser.feed('event: ready\ndata: {"after":"0"}\nretry: 3000\n\n: keep-alive\n\n');
  parser.feed('id: 12\nevent: notification\ndata: {"id":"12"}\n\n');
  parser.feed('event: token_ended\ndata: {"reason":"revoked"}\n\n');
  t.same(events, [
    { event: "ready", data: '{"after":"0"}', id: "" },
    { event: "notification", data: '{"id":"12"}', id: "12" },
    { event: "token_ended", data: '{"reason":"revoked"}', id: "12" },
  ]);
  t.same(comments, ["keep-alive"]);
});

t.test("a block without data dispatches nothing; data without a final blank line waits", async (t) => {
  const events: SseEvent[] = [];
  const parser = createSseParser({ onEvent: (e) => events.push(e) });
  parser.feed("event: ready\n\nid: 3\n\ndata: partial\n");
  t.same(events, []);
  parser.feed("\n");
  t.same(events, [{ event: "message", data: "partial", id: "3" }]);
});

t.test("a line longer than the parser holds is an error, not unbounded memory", async (t) => {
  const parser = createSseParser({ onEvent: () => undefined });
  t.throws(() => parser.feed(`data: ${"x".repeat(1024 * 1024 + 1)}`), /longer than the parser holds/);
});
