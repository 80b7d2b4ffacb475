import { createComponent, type EventName } from "@lit/react";
import * as React from "react";
import {
  type ItemClickDetail,
  type ItemsReceivedDetail,
  NotifyInbox as NotifyInboxElement,
  NotifyPreferences as NotifyPreferencesElement,
} from "./index.js";

// The React wrappers, apart from the main entry so that the elements carry no React: import
// "@notify/inbox-elements/react". Properties (tokenProvider, client, strings) are set as
// properties, and the elements' CustomEvents are props (onItemClick, onSaved, ...).

/** `<NotifyInbox baseUrl token|tokenProvider locale strings onItemClick ... />` */
export const NotifyInbox = createComponent({
  tagName: "notify-inbox",
  elementClass: NotifyInboxElement,
  react: React,
  events: {
    onItemClick: "notify-inbox:item-click" as EventName<CustomEvent<ItemClickDetail>>,
    onItemsReceived: "notify-inbox:items-received" as EventName<CustomEvent<ItemsReceivedDetail>>,
    onOpen: "notify-inbox:open" as EventName<CustomEvent<Record<string, never>>>,
    onClose: "notify-inbox:close" as EventName<CustomEvent<Record<string, never>>>,
    onError: "notify-inbox:error" as EventName<CustomEvent<{ error: unknown }>>,
  },
});

/** `<NotifyPreferences baseUrl token|tokenProvider locale strings onSaved onError />` */
export const NotifyPreferences = createComponent({
  tagName: "notify-preferences",
  elementClass: NotifyPreferencesElement,
  react: React,
  events: {
    onSaved: "notify-preferences:saved" as EventName<CustomEvent<{ preferences: unknown }>>,
    onError: "notify-preferences:error" as EventName<CustomEvent<{ error: unknown }>>,
  },
});
