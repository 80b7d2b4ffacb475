import { integer, jsonb, pgTable, primaryKey, text, timestamp } from "drizzle-orm/pg-core";

/** A template id names a template; its content lives in immutable versions. */
export const templates = pgTable("templates", {
  id: text("id").primaryKey(),
  defaultLocale: text("default_locale").notNull().default("en"),
  latestVersion: integer("latest_version").notNull(),
  createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  updatedAt: timestamp("updated_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
});

/**
 * An immutable version with the data parameters it declares. The default locale belongs to the
 * version (null on versions written before it did: the template's then applies), so a later
 * version that changes it cannot break the locale fallback of notifications pinned to this one.
 */
export const templateVersions = pgTable(
  "template_versions",
  {
    templateId: text("template_id")
      .notNull()
      .references(() => templates.id, { onDelete: "cascade" }),
    version: integer("version").notNull(),
    params: jsonb("params").$type<string[]>().notNull(),
    defaultLocale: text("default_locale"),
    /** A notification without a deliver_by of its own is not sent later than this after it was accepted. */
    ttlSeconds: integer("ttl_seconds"),
    createdAt: timestamp("created_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.templateId, t.version] })],
);

/** The content of a version for one (channel, locale): subject and eta body. */
export const templateVariants = pgTable(
  "template_variants",
  {
    templateId: text("template_id").notNull(),
    version: integer("version").notNull(),
    channel: text("channel").notNull(),
    locale: text("locale").notNull(),
    subject: text("subject"),
    bodyTemplate: text("body_template").notNull(),
  },
  (t) => [primaryKey({ columns: [t.templateId, t.version, t.channel, t.locale] })],
);
