import { NotifyInbox } from "./inbox.js";
import { NotifyPreferences } from "./preferences.js";

export { ConnectedElement, type TokenProvider } from "./base.js";
export { type ItemClickDetail, type ItemsReceivedDetail, NotifyInbox } from "./inbox.js";
export { type InboxPreferences, NotifyPreferences, PREFERENCE_CHANNELS } from "./preferences.js";
export { de, en, type InboxStrings, registerLocale, relativeTime, resolveLocale, stringsFor } from "./strings.js";

/**
 * Registers both elements under their tag names, once: importing this module (or loading
 * dist/notify-inbox.js) is enough. A page that loads two copies keeps the first.
 */
export function defineElements(registry: CustomElementRegistry = customElements): void {
  if (!registry.get("notify-inbox")) registry.define("notify-inbox", NotifyInbox);
  if (!registry.get("notify-preferences")) registry.define("notify-preferences", NotifyPreferences);
}

defineElements();

declare global {
  interface HTMLElementTagNameMap {
    "notify-inbox": NotifyInbox;
    "notify-preferences": NotifyPreferences;
  }
}
