/**
 * Every text the two elements show or announce, per locale. A caller picks the table with the
 * `locale` attribute (else the browser's language), and replaces any entry with the `strings`
 * property. Counts go through `Intl.PluralRules`, times through `Intl.RelativeTimeFormat`.
 */
export interface InboxStrings {
  /** The bell's accessible name: "Notifications, 3 unread". */
  bellLabel(unread: number): string;
  /** The badge's text when the count is above 99. */
  badgeOverflow: string;
  panelTitle: string;
  closePanel: string;
  markAllRead: string;
  markRead: string;
  markUnread: string;
  archive: string;
  unarchive: string;
  /** Shown in place of an item without a title. */
  untitled: string;
  unreadMarker: string;
  empty: string;
  emptyHint: string;
  loading: string;
  loadingMore: string;
  loadError: string;
  retry: string;
  /** The connection line of the panel, per ConnectionState. */
  connection: { connecting: string; open: string; polling: string; closed: string };
  /** The live region's announcement of items that arrived. */
  newItems(count: number, title: string | null): string;

  preferencesTitle: string;
  channelsLegend: string;
  channelsHint: string;
  channelNames: Record<string, string>;
  categoriesLegend: string;
  categoriesHint: string;
  noCategories: string;
  /** Why a critical category's toggle is disabled. */
  lockedReason: string;
  quietHoursLegend: string;
  quietHoursEnabled: string;
  quietHoursStart: string;
  quietHoursEnd: string;
  quietHoursHint: string;
  timeZone: string;
  language: string;
  languageDefault: string;
  save: string;
  saving: string;
  saved: string;
  saveError(detail: string): string;
  preferencesLoading: string;
  preferencesLoadError: string;
}

const plural = (locale: string, count: number, forms: { one: string; other: string }) =>
  (new Intl.PluralRules(locale).select(count) === "one" ? forms.one : forms.other).replace("{count}", String(count));

export const en: InboxStrings = {
  bellLabel: (unread) =>
    unread === 0
      ? "Notifications"
      : plural("en", unread, { one: "Notifications, 1 unread", other: "Notifications, {count} unread" }),
  badgeOverflow: "99+",
  panelTitle: "Notifications",
  closePanel: "Close notifications",
  markAllRead: "Mark all as read",
  markRead: "Mark as read",
  markUnread: "Mark as unread",
  archive: "Archive",
  unarchive: "Move to inbox",
  untitled: "Notification",
  unreadMarker: "Unread",
  empty: "You're all caught up",
  emptyHint: "New notifications appear here as they arrive.",
  loading: "Loading notifications…",
  loadingMore: "Loading more…",
  loadError: "Notifications could not be loaded.",
  retry: "Try again",
  connection: {
    connecting: "Connecting…",
    open: "Live",
    polling: "Checking for new notifications periodically",
    closed: "Offline: reconnecting",
  },
  newItems: (count, title) =>
    count === 1 && title !== null
      ? `New notification: ${title}`
      : plural("en", count, { one: "1 new notification", other: "{count} new notifications" }),

  preferencesTitle: "Notification preferences",
  channelsLegend: "Channels",
  channelsHint: "Where you receive notifications.",
  channelNames: { email: "Email", sms: "Text message (SMS)", push: "Push notifications", in_app: "In-app inbox" },
  categoriesLegend: "Topics",
  categoriesHint: "What you receive notifications about.",
  noCategories: "There are no topics to choose from yet.",
  lockedReason: "Always sent: needed for your account's security.",
  quietHoursLegend: "Quiet hours",
  quietHoursEnabled: "Hold promotional notifications during quiet hours",
  quietHoursStart: "From",
  quietHoursEnd: "Until",
  quietHoursHint: "Important notifications are still delivered.",
  timeZone: "Time zone",
  language: "Language",
  languageDefault: "Default",
  save: "Save preferences",
  saving: "Saving…",
  saved: "Your preferences are saved.",
  saveError: (detail) => `Your preferences could not be saved: ${detail}`,
  preferencesLoading: "Loading your preferences…",
  preferencesLoadError: "Your preferences could not be loaded.",
};

export const de: InboxStrings = {
  bellLabel: (unread) =>
    unread === 0
      ? "Benachrichtigungen"
      : plural("de", unread, {
          one: "Benachrichtigungen, 1 ungelesen",
          other: "Benachrichtigungen, {count} ungelesen",
        }),
  badgeOverflow: "99+",
  panelTitle: "Benachrichtigungen",
  closePanel: "Benachrichtigungen schließen",
  markAllRead: "Alle als gelesen markieren",
  markRead: "Als gelesen markieren",
  markUnread: "Als ungelesen markieren",
  archive: "Archivieren",
  unarchive: "In den Posteingang",
  untitled: "Benachrichtigung",
  unreadMarker: "Ungelesen",
  empty: "Keine neuen Benachrichtigungen",
  emptyHint: "Neue Benachrichtigungen erscheinen hier, sobald sie eintreffen.",
  loading: "Benachrichtigungen werden geladen…",
  loadingMore: "Weitere werden geladen…",
  loadError: "Die Benachrichtigungen konnten nicht geladen werden.",
  retry: "Erneut versuchen",
  connection: {
    connecting: "Verbindung wird aufgebaut…",
    open: "Live",
    polling: "Neue Benachrichtigungen werden regelmäßig abgerufen",
    closed: "Offline: Verbindung wird wiederhergestellt",
  },
  newItems: (count, title) =>
    count === 1 && title !== null
      ? `Neue Benachrichtigung: ${title}`
      : plural("de", count, { one: "1 neue Benachrichtigung", other: "{count} neue Benachrichtigungen" }),

  preferencesTitle: "Benachrichtigungseinstellungen",
  channelsLegend: "Kanäle",
  channelsHint: "Wo Sie Benachrichtigungen erhalten.",
  channelNames: { email: "E-Mail", sms: "SMS", push: "Push-Benachrichtigungen", in_app: "Posteingang in der App" },
  categoriesLegend: "Themen",
  categoriesHint: "Worüber Sie benachrichtigt werden.",
  noCategories: "Es gibt noch keine Themen zur Auswahl.",
  lockedReason: "Wird immer gesendet: für die Sicherheit Ihres Kontos nötig.",
  quietHoursLegend: "Ruhezeiten",
  quietHoursEnabled: "Werbliche Benachrichtigungen in den Ruhezeiten zurückhalten",
  quietHoursStart: "Von",
  quietHoursEnd: "Bis",
  quietHoursHint: "Wichtige Benachrichtigungen werden trotzdem zugestellt.",
  timeZone: "Zeitzone",
  language: "Sprache",
  languageDefault: "Standard",
  save: "Einstellungen speichern",
  saving: "Wird gespeichert…",
  saved: "Ihre Einstellungen sind gespeichert.",
  saveError: (detail) => `Ihre Einstellungen konnten nicht gespeichert werden: ${detail}`,
  preferencesLoading: "Ihre Einstellungen werden geladen…",
  preferencesLoadError: "Ihre Einstellungen konnten nicht geladen werden.",
};

/** The tables the elements know, by language tag; `registerLocale` adds one. */
const TABLES = new Map<string, InboxStrings>([
  ["en", en],
  ["de", de],
]);

/** Adds (or replaces) the table of a language tag, e.g. "fr" or "pt-BR". */
export function registerLocale(tag: string, table: InboxStrings): void {
  TABLES.set(tag.toLowerCase(), table);
}

/**
 * The locale to use: the element's `locale` attribute, else the browser's language, else "en";
 * the table is that tag's, else its language's ("de-AT" takes "de"), else English.
 */
export function resolveLocale(requested: string | null | undefined): { locale: string; table: InboxStrings } {
  const browser = (globalThis as { navigator?: { language?: string } }).navigator?.language;
  const wanted = requested || browser || "en";
  let locale = "en";
  try {
    locale = Intl.getCanonicalLocales(wanted)[0] ?? "en";
  } catch {
    // Not a language tag: English.
  }
  const exact = TABLES.get(locale.toLowerCase());
  const language = TABLES.get((locale.split("-")[0] ?? "en").toLowerCase());
  return { locale, table: exact ?? language ?? en };
}

/** The table for `locale` with the caller's overrides on top (a partial table of the same shape). */
export function stringsFor(
  locale: string | null | undefined,
  overrides?: Partial<InboxStrings>,
): InboxStrings & { locale: string } {
  const { locale: resolved, table } = resolveLocale(locale);
  return {
    ...table,
    ...overrides,
    connection: { ...table.connection, ...overrides?.connection },
    channelNames: { ...table.channelNames, ...overrides?.channelNames },
    locale: resolved,
  };
}

const UNITS: Array<[Intl.RelativeTimeFormatUnit, number]> = [
  ["year", 365 * 24 * 3600],
  ["month", 30 * 24 * 3600],
  ["week", 7 * 24 * 3600],
  ["day", 24 * 3600],
  ["hour", 3600],
  ["minute", 60],
];

/** "5 minutes ago", "gestern", "now": the largest unit that fits, in the locale's words. */
export function relativeTime(locale: string, iso: string, now = Date.now()): string {
  const seconds = Math.round((Date.parse(iso) - now) / 1000);
  const format = new Intl.RelativeTimeFormat(locale, { numeric: "auto" });
  for (const [unit, size] of UNITS) {
    if (Math.abs(seconds) >= size) return format.format(Math.trunc(seconds / size), unit);
  }
  return format.format(0, "second");
}
