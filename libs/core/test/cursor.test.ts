import fc from "fast-check";
import t from "tap";
import { AppError, decodeCursor, encodeCursor } from "../src/index.js";

const secret = "s3cret-s3cret-s3cret-s3cret-s3cret";
const positions = fc.record({
  micros: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
  id: fc.string({ minLength: 1, maxLength: 256, unit: "grapheme" }),
});
const contexts = fc.string({ maxLength: 200 });

const refusal = (fn: () => unknown): string | null => {
  try {
    fn();
    return null;
  } catch (error) {
    if (error instanceof AppError && error.code === "invalid_cursor") return error.message;
    throw error;
  }
};

t.test("a cursor decodes to the position it was made from, and is URL-safe", async (t) => {
  fc.assert(
    fc.property(positions, contexts, (position, context) => {
      const cursor = encodeCursor(secret, context, position);
      t.match(cursor, /^[A-Za-z0-9_-]+$/);
      t.same(decodeCursor(secret, context, cursor), position);
    }),
    { numRuns: 500 },
  );
});

t.test("any change to a cursor is detected", async (t) => {
  fc.assert(
    fc.property(
      positions,
      contexts,
      fc.nat(),
      fc.constantFrom(..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
      (position, context, at, replacement) => {
        const cursor = encodeCursor(secret, context, position);
        const index = at % cursor.length;
        fc.pre(cursor[index] !== replacement);
        const edited = cursor.slice(0, index) + replacement + cursor.slice(index + 1);
        t.not(
          refusal(() => decodeCursor(secret, context, edited)),
          null,
          edited,
        );
      },
    ),
    { numRuns: 1000 },
  );
});

t.test("a cursor is refused under another context, secret, or truncated", async (t) => {
  fc.assert(
    fc.property(positions, contexts, contexts, (position, context, other) => {
      fc.pre(context !== other);
      const cursor = encodeCursor(secret, context, position);
      t.not(
        refusal(() => decodeCursor(secret, other, cursor)),
        null,
      );
      t.not(
        refusal(() => decodeCursor(`${secret}x`, context, cursor)),
        null,
      );
      t.not(
        refusal(() => decodeCursor(secret, context, cursor.slice(0, -1))),
        null,
      );
    }),
    { numRuns: 300 },
  );
});

t.test("a cursor of another encoding version is refused by name", async (t) => {
  const cursor = encodeCursor(secret, "c", { micros: 1n, id: "x" });
  const bytes = Buffer.from(cursor, "base64url");
  bytes[0] = 0;
  t.match(
    refusal(() => decodeCursor(secret, "c", bytes.toString("base64url"))),
    /another version/,
  );
  // The inbox's older JSON cursors are not mistaken for ours.
  const json = Buffer.from(JSON.stringify({ v: 1, id: 5 })).toString("base64url");
  t.not(
    refusal(() => decodeCursor(secret, "c", json)),
    null,
  );
  for (const junk of ["", "%%%", "a".repeat(600), "AQ"])
    t.not(
      refusal(() => decodeCursor(secret, "c", junk)),
      null,
    );
});
