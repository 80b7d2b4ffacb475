import fc from "fast-check";
import t from "tap";
import { filterFunctions as f, outputText, TEMPLATE_FILTERS } from "../../src/template/filters.js";

// What each filter does to a value, and that none throws on any value.

t.test("every filter the parser accepts has an implementation", async (t) => {
  t.same(Object.keys(f).sort(), Object.keys(TEMPLATE_FILTERS).sort());
});

t.test("values as text: strings as they are, numbers and booleans printed, nothing for none", async (t) => {
  t.equal(outputText("a"), "a");
  t.equal(outputText(1.5), "1.5");
  t.equal(outputText(false), "false");
  t.equal(outputText(10n), "10");
  t.equal(outputText(null), "");
  t.equal(outputText(undefined), "");
  t.equal(outputText({ a: [1] }), '{"a":[1]}');
  t.equal(outputText({ a: 1n }), "", "an object JSON cannot print");
  t.equal(
    outputText(() => 1),
    "",
  );
});

t.test("the filters", async (t) => {
  t.equal(f.upper("straße"), "STRASSE");
  t.equal(f.lower("ÉTÉ"), "été");
  t.equal(f.trim("  x \n"), "x");
  t.equal(f.upper(null), "");
  t.equal(f.fallback(undefined, "friend"), "friend");
  t.equal(f.fallback(null, 0), 0);
  t.equal(f.fallback("", "x"), "x");
  t.equal(f.fallback(0, "x"), 0);
  t.equal(f.number(12.3456, 2), "12.35");
  t.equal(f.number("2", 1), "2.0");
  t.equal(f.number(7), "7");
  t.equal(f.number("  "), "  ");
  t.equal(f.number("abc", 2), "abc");
  t.equal(f.date("2026-03-04T05:06:07Z"), "2026-03-04");
  t.equal(f.date(0, "datetime"), "1970-01-01 00:00 UTC");
  t.equal(f.date("2026-03-04T05:06:07.5Z", "iso"), "2026-03-04T05:06:07.500Z");
  t.equal(f.date("not a date"), "not a date");
  t.equal(f.date(true), "true");
  t.equal(f.join(["a", 1, null]), "a, 1, ");
  t.equal(f.join(["a", "b"], " / "), "a / b");
  t.equal(f.join("solo"), "solo");
});

t.test("property: no filter throws on any value, and the text filters answer text", async (t) => {
  const value = fc.anything({ withBigInt: true, withDate: true, withMap: true, withSet: true });
  fc.assert(
    fc.property(
      value,
      fc.integer({ min: 0, max: 10 }),
      fc.constantFrom("date", "datetime", "iso"),
      fc.string(),
      (v, digits, style, separator) => {
        const texts = [
          f.upper(v),
          f.lower(v),
          f.trim(v),
          f.number(v),
          f.number(v, digits),
          f.date(v),
          f.date(v, style),
          f.join(v),
          f.join(v, separator),
        ];
        if (texts.some((s) => typeof s !== "string")) throw new Error(`not text: ${JSON.stringify(texts)}`);
        f.fallback(v, separator);
      },
    ),
    { numRuns: 3000 },
  );
  t.pass("3000 values");
});
