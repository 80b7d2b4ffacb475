import t from "tap";
import { de, en, relativeTime, resolveLocale, stringsFor } from "../src/strings.js";

// The elements' texts: chosen by the locale attribute (or the browser's language), with the
// language's table for a regional tag, English for an unknown one; a caller's strings over them.

t.test("a locale picks its table; a regional tag its language's; an unknown one English", async (t) => {
  t.equal(resolveLocale("de").table, de);
  t.equal(resolveLocale("de-AT").table, de, "de-AT takes de");
  t.equal(resolveLocale("de-AT").locale, "de-AT", "and keeps its own tag for dates and plurals");
  t.equal(resolveLocale("fr").table, en);
  t.equal(resolveLocale("not a tag!").table, en);
});

t.test("the same keys in every table", async (t) => {
  t.same(Object.keys(de).sort(), Object.keys(en).sort());
  t.same(Object.keys(de.connection).sort(), Object.keys(en.connection).sort());
  t.same(Object.keys(de.channelNames).sort(), Object.keys(en.channelNames).sort());
});

t.test("counts are plural-aware; a caller's strings replace the table's", async (t) => {
  t.equal(en.bellLabel(0), "Notifications");
  t.equal(en.bellLabel(1), "Notifications, 1 unread");
  t.equal(en.bellLabel(3), "Notifications, 3 unread");
  t.equal(de.bellLabel(2), "Benachrichtigungen, 2 ungelesen");
  t.equal(en.newItems(1, "Welcome"), "New notification: Welcome");
  t.equal(en.newItems(2, null), "2 new notifications");
  const custom = stringsFor("en", { panelTitle: "Activity", connection: { open: "Connected" } as never });
  t.equal(custom.panelTitle, "Activity");
  t.equal(custom.connection.open, "Connected");
  t.equal(custom.connection.polling, en.connection.polling, "the rest of a nested table stays");
});

t.test("relative times in the locale's words", async (t) => {
  const now = Date.parse("2026-01-10T12:00:00Z");
  t.equal(relativeTime("en", "2026-01-10T11:55:00Z", now), "5 minutes ago");
  t.equal(relativeTime("en", "2026-01-09T12:00:00Z", now), "yesterday");
  t.equal(relativeTime("de", "2026-01-09T12:00:00Z", now), "gestern");
  t.equal(relativeTime("en", "2026-01-10T11:59:58Z", now), "now");
});
