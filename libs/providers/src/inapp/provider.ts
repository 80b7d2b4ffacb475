import type { ProviderAnswer } from "@notify/core";
import type { OutboundMessage, Provider } from "../provider.js";

export interface InAppConfig {
  /**
   * Stores the message in the user's inbox (idempotent per notification) and wakes their open
   * streams; resolves with the item's id. With @notify/db: `(m) => storeInboxItem(sql, {...})`.
   */
  store(message: OutboundMessage): Promise<number | string>;
}

/**
 * In-app delivery: our own realtime gateway is the "provider". Delivered means stored in the
 * inbox, from where open streams push it and a reconnecting client resumes.
 */
export function createInAppProvider(config: InAppConfig): Provider {
  const send = async (message: OutboundMessage): Promise<ProviderAnswer> => {
    try {
      const id = await config.store(message);
      return { outcome: "accepted", providerId: `inbox:${id}` };
    } catch (error) {
      return { outcome: "transient", reason: `inbox unavailable: ${(error as Error).message}` };
    }
  };
  return { name: "inapp", channel: "in_app", idempotent: true, send };
}
