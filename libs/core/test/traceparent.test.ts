import fc from "fast-check";
import t from "tap";
import { traceIdOf } from "../src/index.js";

const hex = (length: number) =>
  fc.string({ unit: fc.constantFrom(..."0123456789abcdef"), minLength: length, maxLength: length });

t.test("the trace id of a well-formed traceparent, whatever its ids and flags", async () => {
  fc.assert(
    fc.property(hex(32), hex(16), hex(2), (trace, parent, flags) => {
      fc.pre(!/^0+$/.test(trace) && !/^0+$/.test(parent));
      return traceIdOf(`00-${trace}-${parent}-${flags}`) === trace;
    }),
  );
});

t.test("anything else has none, and never throws", async () => {
  fc.assert(
    fc.property(fc.string({ maxLength: 80 }), (text) => {
      const id = traceIdOf(text);
      return id === null || (/^[0-9a-f]{32}$/.test(id) && text.includes(id));
    }),
  );
  const trace = "4bf92f3577b34da6a3ce929d0e0e4736";
  const parent = "00f067aa0ba902b7";
  t.equal(traceIdOf(`00-${trace}-${parent}-01`), trace, "the W3C example");
  t.equal(traceIdOf(null), null);
  t.equal(traceIdOf(""), null);
  t.equal(traceIdOf(`00-${"0".repeat(32)}-${parent}-01`), null, "all-zero trace id");
  t.equal(traceIdOf(`00-${trace}-${"0".repeat(16)}-01`), null, "all-zero parent id");
  t.equal(traceIdOf(`ff-${trace}-${parent}-01`), null, "version ff");
  t.equal(traceIdOf(`00-${trace.toUpperCase()}-${parent}-01`), null, "upper case");
  t.equal(traceIdOf(`00-${trace}-${parent}-01-extra`), null, "version 00 has exactly four fields");
  t.equal(traceIdOf(`01-${trace}-${parent}-01-extra`), trace, "a later version may add fields");
  t.equal(traceIdOf(`00-${trace.slice(1)}-${parent}-01`), null, "short trace id");
});
