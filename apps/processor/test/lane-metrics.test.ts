import { createMetrics } from "@notify/http";
import { freshBus } from "@notify/testing";
import t from "tap";
import { laneBacklogCollector } from "../src/metrics.js";

// Backlog per lane consumer, as an operator graphs it: published lane messages that no processor
// has taken yet show as pending on their (lane, partition).
t.test("lane backlog per consumer is read from JetStream at scrape time", async (t) => {
  const bus = await freshBus(t, 2);
  const metrics = createMetrics("processor");
  metrics.collect(laneBacklogCollector(bus, metrics, 0));
  for (let i = 0; i < 3; i++) await bus.publish(bus.subjects.lane("transactional", 1), { i }, `m-${i}`);
  const text = await metrics.render();
  t.match(text, /^notify_lane_pending\{lane="transactional",partition="1"\} 3$/m);
  t.match(text, /^notify_lane_pending\{lane="transactional",partition="0"\} 0$/m);
  t.match(text, /^notify_lane_ack_pending\{lane="promotional",partition="1"\} 0$/m);
  t.notMatch(text, /^metrics_collector_errors_total [1-9]/m, "every consumer was read");
});
