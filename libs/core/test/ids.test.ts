import t from "tap";
import { isUuid, newId } from "../src/index.js";

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

t.test("newId gives UUIDv7s, strictly increasing, past several refills of the random pool", async (t) => {
  const ids = Array.from({ length: 50_000 }, () => newId());
  t.ok(
    ids.every((id) => V7.test(id) && isUuid(id)),
    "version 7, RFC 9562 variant",
  );
  t.ok(
    ids.every((id, i) => i === 0 || id > (ids[i - 1] as string)),
    "each sorts after the one before",
  );
  const before = Date.now();
  const stamp = newId();
  const ms = Number.parseInt(stamp.replaceAll("-", "").slice(0, 12), 16);
  t.ok(Math.abs(ms - before) < 1000, "the first 48 bits are the unix time in ms");
  // The random tail (rand_b) varies: a pool that stopped refilling would repeat it.
  t.ok(new Set(ids.map((id) => id.slice(-8))).size > 49_000, "random bits differ");
});
