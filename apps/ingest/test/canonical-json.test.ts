import fc from "fast-check";
import t from "tap";
import { canonicalJson, requestHash } from "../src/notifications/canonical-json.js";

// A plain reference for the text every stored request hash is computed from: the hashes of
// requests accepted before a deploy must match their retries after it.
function reference(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(reference).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.keys(value as Record<string, unknown>)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${reference((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value);
}

t.test("the canonical text is the one the stored hashes were made from", async (t) => {
  fc.assert(
    fc.property(fc.jsonValue(), (value) => canonicalJson(value) === reference(value)),
    { numRuns: 2000 },
  );
  fc.assert(
    fc.property(fc.anything(), (value) => canonicalJson(value) === reference(value)),
    { numRuns: 1000 },
  );
  t.pass();
});

t.test("key order does not change the hash; any value does", async (t) => {
  const a = { user_id: "u", data: { b: 1, a: [1, { y: 2, x: 3 }] }, channels: ["email"] };
  const b = { channels: ["email"], data: { a: [1, { x: 3, y: 2 }], b: 1 }, user_id: "u" };
  t.equal(requestHash(a), requestHash(b));
  t.not(requestHash(a), requestHash({ ...b, data: { a: [1, { x: 3, y: 2 }], b: 2 } }));
  t.equal(
    requestHash({ a: 1 }),
    "015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862",
    'SHA-256 of {"a":1}',
  );
});
