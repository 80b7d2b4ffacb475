import { setTimeout as sleep } from "node:timers/promises";
import type { Bus } from "@notify/bus";
import { checkCompletions, type Database, type DueDelivery, dispatchDue } from "@notify/db";
import type { Logger } from "@notify/log";
import { every, type Leader, type Periodic } from "../periodic.js";

/** Rows one transaction of the dispatcher takes at most. */
const BATCH = 500;

/**
 * How soon deliveries held for their endpoint's attempts in flight are looked at again: soon
 * after a round that published (a fast endpoint answers within milliseconds), then less often
 * while rounds find no room (a slow one), so a held backlog costs at most ten looks a second.
 */
const HELD_PAUSE_MS = { first: 10, most: 100 };

/**
 * The outbound webhooks' dispatcher, on the instance that holds the singleton lease: every
 * `intervalMs` it writes `notification.completed` for the notifications whose every channel now
 * has an outcome, then publishes each due delivery's next attempt on NOTIFY_WEBHOOKS for the
 * workers' senders (its message id names the delivery's state, so a publish repeated after a
 * crash is dropped by JetStream), batch after batch until none is due.
 */
export function startWebhookDispatcher(
  deps: { database: Database; bus: Bus; log: Logger },
  options: { intervalMs: number; inFlight: number; leader?: Leader },
): Periodic {
  const publish = async (deliveries: DueDelivery[]) => {
    await Promise.all(
      deliveries.map((d) =>
        deps.bus.publish(
          deps.bus.subjects.webhooks,
          { endpoint_id: d.endpoint_id, event_id: d.event_id, run: d.run, attempt: d.attempt },
          d.message_id,
        ),
      ),
    );
  };
  return every(
    options.intervalMs,
    deps.log,
    "dispatching webhook deliveries",
    async (isStopping) => {
      // Round after round while there is work: a published attempt is queued, so the next round
      // takes what else is due. Deliveries held for their endpoint's attempts in flight are
      // looked at again shortly, as answers free room; the loop ends when nothing is due.
      let pause = HELD_PAUSE_MS.first;
      while (!isStopping()) {
        const completed = await checkCompletions(deps.database, BATCH);
        const { published, held } = await dispatchDue(deps.database, BATCH, publish, options.inFlight);
        if (completed > 0 || published > 0) {
          pause = HELD_PAUSE_MS.first;
          continue;
        }
        if (!held) break;
        await sleep(Math.min(options.intervalMs, pause));
        pause = Math.min(pause * 2, HELD_PAUSE_MS.most);
      }
    },
    options.leader,
  );
}
