import { AppError, type Channel } from "@notify/core";
import type { Database } from "@notify/db";
import { Eta } from "eta";

export interface Rendered {
  subject: string | null;
  body: string;
  locale: string;
  version: number;
}

interface Variant {
  subject: ((data: object) => string) | null;
  body: (data: object) => string;
  locale: string;
  version: number;
}

/** Locale fallback chain: the user's locale, its language, then the template's default. */
export function localeChain(userLocale: string | null | undefined, defaultLocale: string): string[] {
  const chain: string[] = [];
  if (userLocale) {
    chain.push(userLocale);
    const language = userLocale.split("-")[0];
    if (language && language !== userLocale) chain.push(language);
  }
  if (!chain.includes(defaultLocale)) chain.push(defaultLocale);
  return chain;
}

/**
 * Renders stored eta templates. A template body is code (eta compiles it to JavaScript), so
 * each variant is compiled once and kept; renderString would recompile on every call. Email
 * bodies are HTML and escape data; SMS, push and in-app bodies are plain text and do not.
 */
export function createRenderer(database: Database, cacheTtlMs = 10_000) {
  const html = new Eta({ autoEscape: true, autoTrim: false, useWith: false, varName: "it" });
  const plain = new Eta({ autoEscape: false, autoTrim: false, useWith: false, varName: "it" });
  const compiled = new Map<string, Variant>();
  const latest = new Map<string, { version: number; defaultLocale: string; expires: number }>();

  const compile = (engine: Eta, source: string) => {
    const fn = engine.compile(source);
    return (data: object) => fn.call(engine, data as never);
  };

  async function head(templateId: string) {
    const hit = latest.get(templateId);
    if (hit && hit.expires > Date.now()) return hit;
    const [row] = await database.sql<{ latest_version: number; default_locale: string }[]>`
      select latest_version, default_locale from templates where id = ${templateId}`;
    if (!row) throw new AppError("unknown_template", `template "${templateId}" does not exist`);
    const value = { version: row.latest_version, defaultLocale: row.default_locale, expires: Date.now() + cacheTtlMs };
    latest.set(templateId, value);
    return value;
  }

  async function variant(templateId: string, channel: Channel, userLocale: string | null): Promise<Variant | null> {
    const { version, defaultLocale } = await head(templateId);
    const chain = localeChain(userLocale, defaultLocale);
    for (const locale of chain) {
      const hit = compiled.get(`${templateId}\u0000${version}\u0000${channel}\u0000${locale}`);
      if (hit) return hit;
    }
    const rows = await database.sql<{ locale: string; subject: string | null; body_template: string }[]>`
      select locale, subject, body_template from template_variants
      where template_id = ${templateId} and version = ${version} and channel = ${channel} and locale = any(${chain})`;
    const row = chain.map((locale) => rows.find((r) => r.locale === locale)).find(Boolean);
    if (!row) return null;
    const engine = channel === "email" ? html : plain;
    const value: Variant = {
      subject: row.subject === null ? null : compile(plain, row.subject),
      body: compile(engine, row.body_template),
      locale: row.locale,
      version,
    };
    compiled.set(`${templateId}\u0000${version}\u0000${channel}\u0000${row.locale}`, value);
    return value;
  }

  return async (
    templateId: string,
    channel: Channel,
    userLocale: string | null,
    data: Record<string, unknown>,
  ): Promise<Rendered | null> => {
    const found = await variant(templateId, channel, userLocale);
    if (!found) return null;
    return {
      subject: found.subject ? found.subject(data) : null,
      body: found.body(data),
      locale: found.locale,
      version: found.version,
    };
  };
}
export type Renderer = ReturnType<typeof createRenderer>;
