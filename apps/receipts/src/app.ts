import type { Bus } from "@notify/bus";
import type { Database } from "@notify/db";
import { mountHealth, newApp } from "@notify/http";
import type { Logger } from "@notify/log";

export interface ReceiptsDeps {
  database: Database;
  bus: Bus;
  log: Logger;
  isStopping: () => boolean;
}

/**
 * Provider receipts service. Webhook routes (SendGrid Event Webhook, Plivo delivery reports)
 * mount here under /webhooks/<provider>; until then it serves health and readiness only.
 */
export function createApp(deps: ReceiptsDeps) {
  const app = newApp(deps.log);
  mountHealth(app, { postgres: () => deps.database.ping(), nats: () => deps.bus.isConnected() }, deps.isStopping);
  return app;
}
