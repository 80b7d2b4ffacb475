import fc from "fast-check";
import t from "tap";
import { missingParams, PARAM_NAME } from "../../src/template/params.js";

t.test("missingParams names every missing declared parameter, nested ones by path", async (t) => {
  t.same(missingParams(["name", "order.id"], { name: "x", order: { id: 0 } }), []);
  t.same(missingParams(["name", "order.id"], { order: {} }), [
    { field: "data.name", message: 'template parameter "name" is required' },
    { field: "data.order.id", message: 'template parameter "order.id" is required' },
  ]);
  t.same(
    missingParams(["a.b"], { a: "string" }).map((e) => e.field),
    ["data.a.b"],
  );
  t.same(missingParams(["a"], { a: null }).length, 1, "null counts as missing");
});

t.test("declared parameter names are dotted identifiers", async (t) => {
  for (const name of ["name", "order.id", "_x.y_2"]) t.ok(PARAM_NAME.test(name), name);
  for (const name of ["", "1a", "a.", ".a", "a..b", "a-b", "a[0]", "a b"]) t.notOk(PARAM_NAME.test(name), name);
});

t.test("property: every declared parameter the data holds is present, and none of empty data is", async (t) => {
  const param = fc
    .array(fc.constantFrom("a", "b", "c"), { minLength: 1, maxLength: 3 })
    .map((parts) => parts.join("."));
  const value = fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(0), fc.constant(""), fc.constant([]));
  fc.assert(
    fc.property(fc.array(fc.tuple(param, value), { maxLength: 6 }), (entries) => {
      const data: Record<string, unknown> = {};
      for (const [path, leaf] of entries) {
        const parts = path.split(".");
        let node = data;
        parts.forEach((part, i) => {
          if (i === parts.length - 1) {
            if (!(part in node)) node[part] = leaf;
            return;
          }
          const next = node[part];
          if (next === null || typeof next !== "object" || Array.isArray(next)) node[part] = {};
          node = node[part] as Record<string, unknown>;
        });
      }
      const declared = entries.map(([path]) => path);
      const missing = missingParams(declared, data);
      if (missing.length > 0) throw new Error(`${JSON.stringify(missing)} of ${JSON.stringify(data)}`);
      const none = missingParams(declared, {}).map((e) => e.field);
      if (JSON.stringify(none) !== JSON.stringify(declared.map((p) => `data.${p}`))) throw new Error(String(none));
    }),
  );
  t.pass("held");
});
