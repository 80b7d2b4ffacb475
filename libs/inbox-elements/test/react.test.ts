import { createElement } from "react";
import { renderToString } from "react-dom/server";
import t from "tap";

// The React wrapper (@lit/react) renders the elements' tags and registers the elements; lit's
// server-side shim stands in for the DOM here. Imported by URL: the wrapper's types need the DOM
// library, which the repository's test type check leaves out (tsc -b checks them with it).
const wrapper = (await import(new URL("../src/react.ts", import.meta.url).href)) as Record<string, unknown>;

t.test("the wrapper offers NotifyInbox and NotifyPreferences, and renders their tags", async (t) => {
  t.same(Object.keys(wrapper).sort(), ["NotifyInbox", "NotifyPreferences"]);
  const inbox = renderToString(
    createElement(wrapper.NotifyInbox as never, { baseUrl: "https://notify.example", locale: "de" }),
  );
  t.match(inbox, /^<notify-inbox[ >]/);
  const preferences = renderToString(createElement(wrapper.NotifyPreferences as never, {}));
  t.match(preferences, /^<notify-preferences[ >]/);
  const registry = (globalThis as { customElements?: { get(name: string): unknown } }).customElements;
  t.ok(registry?.get("notify-inbox"), "importing the wrapper registers the elements");
  t.ok(registry?.get("notify-preferences"));
});
