import { eventually } from "@notify/testing";
import t from "tap";
import { startLeasedPartitions } from "../src/partitions.js";
import { processorFixture } from "./helpers.js";

// A processor takes dozens of lane partitions at its start: the operator's log gets one line
// saying how many it holds, not one per partition.
t.test("taking the lane partitions is summed up in one info line", async (t) => {
  const { deps, lines } = await processorFixture(t, { partitions: 8 });
  const partitions = await startLeasedPartitions(deps, { id: "solo", tickMs: 100, ttlMs: 2000 });
  t.teardown(() => partitions.stop());
  const info = () => lines().filter((line) => line.includes('"level":30'));
  await eventually(
    async () => info().find((line) => line.includes("holding 16 of 16 lane partitions")),
    20_000,
    "the summary",
  );
  t.equal(info().filter((line) => line.includes("holding")).length, 1, "once, when the spread settled");
  t.same(
    info()
      .filter((line) => line.includes("lease taken"))
      .map((line) => (JSON.parse(line) as { lease: string }).lease),
    ["singleton"],
    "only the singleton's lease on its own line at info",
  );
  t.equal(
    lines().filter((line) => line.includes('"level":20') && line.includes("lease taken")).length,
    16,
    "each partition at debug",
  );
});
