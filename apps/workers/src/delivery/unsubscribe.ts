import { listUnsubscribeHeaders, offersUnsubscribe, type UnsubscribeSettings, type WorkItem } from "@notify/core";

/** The List-Unsubscribe headers an email work item's message carries; null: none. */
export type UnsubscribeHeaders = (
  item: WorkItem,
) => Record<string, string> | null | Promise<Record<string, string> | null>;

/**
 * Mints each qualifying email's unsubscribe link. The key comes from the deployment's
 * `unsubscribe` secret, read once (`loadKey` is asked again only while it fails: the send then
 * fails as any statement does, and is retried); email that gets no header never waits for it.
 */
export function unsubscribeHeaders(settings: UnsubscribeSettings, loadKey: () => Promise<Buffer>): UnsubscribeHeaders {
  let key: Buffer | undefined;
  return (item) => {
    if (item.channel !== "email" || item.client_id === undefined || !offersUnsubscribe(settings, item)) return null;
    if (key !== undefined) return listUnsubscribeHeaders(key, settings, item);
    return loadKey().then((loaded) => {
      key = loaded;
      return listUnsubscribeHeaders(loaded, settings, item);
    });
  };
}
