import assert from "node:assert/strict";
import fc from "fast-check";
import t from "tap";
import * as v from "valibot";
import { AppError, type FieldError } from "../src/errors.js";
import { validate } from "../src/validate.js";

const Schema = v.strictObject({ name: v.string("name must be a string"), size: v.optional(v.number()) });

/** The field errors of a refused input. */
function refusal(input: unknown): FieldError[] {
  try {
    validate(Schema, input);
  } catch (error) {
    if (error instanceof AppError && error.code === "validation_failed") return error.fields ?? [];
    throw error;
  }
  throw new Error("the input was accepted");
}

t.test("names each kind of fault in a strict object as what it is", async (t) => {
  t.same(refusal({}), [{ field: "name", message: "is required" }], "a missing field is required, not unknown");
  t.same(refusal({ name: "a", extra: 1 }), [{ field: "extra", message: 'unknown field "extra"' }]);
  t.same(refusal({ name: 1 }), [{ field: "name", message: "name must be a string" }]);
  t.same(refusal([1, 2]), [{ field: "(body)", message: "must be a JSON object" }]);
  t.same(refusal(null), [{ field: "(body)", message: "must be a JSON object" }]);
});

t.test("a missing field is never reported as unknown, nor an unknown one as missing", async (t) => {
  const key = fc.string({ minLength: 1, maxLength: 8 }).filter((k) => !["name", "size", "__proto__"].includes(k));
  t.doesNotThrow(() =>
    fc.assert(
      fc.property(fc.dictionary(key, fc.jsonValue(), { maxKeys: 3 }), fc.boolean(), (extra, withName) => {
        fc.pre(!withName || Object.keys(extra).length > 0);
        const fields = refusal(withName ? { ...extra, name: "x" } : extra);
        const named = (message: (m: string) => boolean) => fields.filter((f) => message(f.message)).map((f) => f.field);
        assert.deepEqual(
          named((m) => m === "is required"),
          withName ? [] : ["name"],
        );
        // valibot names the first unknown key only.
        const unknown = named((m) => m.startsWith("unknown field"));
        assert.equal(unknown.length, Math.min(1, Object.keys(extra).length));
        for (const field of unknown) assert.ok(Object.hasOwn(extra, field), field);
      }),
    ),
  );
});
