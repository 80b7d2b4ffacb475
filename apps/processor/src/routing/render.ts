import {
  type Channel,
  checkTemplate,
  isHtmlBody,
  localeFallbackChain,
  missingParams,
  TemplateSyntaxError,
  templateEngineOptions,
} from "@notify/core";
import { type Database, readLatestTemplateVersion, readTemplateVersionForRender } from "@notify/db";
import { createForgettableCache } from "@notify/http";
import { Eta } from "eta";
import { LRUCache } from "lru-cache";

/**
 * Why a channel could not be rendered: shown as the reason of its `failed` status.
 * `template_invalid`: the stored variant is outside the template subset (a row the API did not
 * check, such as one written straight into the database); it is refused, never compiled or run.
 */
export type RenderFailure =
  | "unknown_template"
  | "no_template_variant"
  | "template_data_invalid"
  | "template_invalid"
  | "render_failed";

export type RenderOutcome =
  | { ok: true; subject: string | null; body: string; locale: string; version: number }
  | { ok: false; reason: RenderFailure; detail: string };

export interface RenderRequest {
  templateId: string;
  /** The version pinned at ingest; a message without one renders the latest. */
  version: number | null | undefined;
  channel: Channel;
  locale: string | null;
  data: Record<string, unknown>;
  /**
   * A digest's notification: `data` is `{items, count, omitted}`, and the template's declared
   * parameters are each item's (ingest checked them on every item), not the digest's.
   */
  digest?: boolean;
}

type Compiled = (data: object) => string;

interface Variant {
  locale: string;
  subjectSource: string | null;
  bodySource: string;
  compiled?: { subject: Compiled | null; body: Compiled } | { refused: string };
}

interface Version {
  version: number;
  params: string[];
  defaultLocale: string;
  /** By `${channel} ${locale in lower case}`: stored tags are canonical, older rows may not be. */
  variants: Map<string, Variant>;
}

const isRefused = (source: string) => !checkTemplate(source).ok;

const variantKey = (channel: Channel, locale: string) => `${channel} ${locale.toLowerCase()}`;

/**
 * Renders stored eta templates with the user's locale. Each variant is compiled once, on first
 * use, and kept, as versions never change; renderString would recompile on every call. The
 * engine's settings check every stored subject and body against the template subset again
 * (a row the API did not check may be unsafe): a refused one fails its channel with
 * `template_invalid` and is never run, and what compiles is generated from the parsed tags.
 * Data is checked against the version's declared parameters first.
 */
export function createRenderer(database: Database, options: { latestTtlMs?: number; maxVersions?: number } = {}) {
  const latestTtlMs = options.latestTtlMs ?? 10_000;
  const maxVersions = options.maxVersions ?? 1000;
  const engines = { html: new Eta(templateEngineOptions(true)), plain: new Eta(templateEngineOptions(false)) };
  // Promises, so that a burst of first renders of one version makes one query, not hundreds.
  // Bounded LRUs: template ids come from requests. lru-cache reads a ttl of 0 as "forever".
  const versions = new LRUCache<string, Promise<Version | null>>({ max: maxVersions });
  // A template given a version is forgotten at once (announced on NATS); a missing one is not kept.
  const latest = createForgettableCache<number | null>({ max: maxVersions, ttlMs: latestTtlMs });

  const compile = (engine: Eta, source: string): Compiled => {
    const fn = engine.compile(source);
    return (data) => fn.call(engine, data as never);
  };

  function compileVariant(variant: Variant, channel: Channel): NonNullable<Variant["compiled"]> {
    try {
      return {
        subject: variant.subjectSource === null ? null : compile(engines.plain, variant.subjectSource),
        body: compile(isHtmlBody(channel) ? engines.html : engines.plain, variant.bodySource),
      };
    } catch (error) {
      if (error instanceof TemplateSyntaxError) {
        const part = variant.subjectSource !== null && isRefused(variant.subjectSource) ? "subject" : "body";
        return { refused: `the ${part} of the ${channel} ${variant.locale} variant is not allowed: ${error.message}` };
      }
      throw error;
    }
  }

  function latestVersion(templateId: string): Promise<number | null> {
    return latest.load(
      templateId,
      () => readLatestTemplateVersion(database, templateId),
      (version) => (version === null ? 0 : latestTtlMs),
    );
  }

  async function fetchVersion(templateId: string, version: number): Promise<Version | null> {
    const head = await readTemplateVersionForRender(database, templateId, version);
    if (!head) return null;
    const rows = head.variants;
    return {
      version,
      params: head.params,
      defaultLocale: head.default_locale,
      variants: new Map(
        rows.map((r) => [
          variantKey(r.channel, r.locale),
          { locale: r.locale, subjectSource: r.subject, bodySource: r.body_template },
        ]),
      ),
    };
  }

  function loadVersion(templateId: string, version: number): Promise<Version | null> {
    const key = `${templateId}\u0000${version}`;
    const cached = versions.get(key);
    if (cached) return cached;
    const loading = fetchVersion(templateId, version);
    versions.set(key, loading);
    // Only content is kept: a failed query or a version not (yet) written is asked again.
    loading.then(
      (found) => found === null && versions.delete(key),
      () => versions.delete(key),
    );
    return loading;
  }

  async function render(request: RenderRequest): Promise<RenderOutcome> {
    const version = request.version ?? (await latestVersion(request.templateId));
    const found = version === null ? null : await loadVersion(request.templateId, version);
    if (!found) {
      return {
        ok: false,
        reason: "unknown_template",
        detail: `template "${request.templateId}"${request.version ? ` version ${request.version}` : ""} does not exist`,
      };
    }
    const missing = request.digest ? [] : missingParams(found.params, request.data);
    if (missing.length > 0) {
      return { ok: false, reason: "template_data_invalid", detail: missing.map((m) => m.field).join(", ") };
    }
    const variant = localeFallbackChain(request.locale, found.defaultLocale)
      .map((locale) => found.variants.get(variantKey(request.channel, locale)))
      .find((v) => v !== undefined);
    if (!variant) {
      return {
        ok: false,
        reason: "no_template_variant",
        detail: `version ${found.version} has no ${request.channel} variant for ${request.locale ?? found.defaultLocale}`,
      };
    }
    try {
      variant.compiled ??= compileVariant(variant, request.channel);
      if ("refused" in variant.compiled) {
        return { ok: false, reason: "template_invalid", detail: variant.compiled.refused };
      }
      return {
        ok: true,
        subject: variant.compiled.subject ? variant.compiled.subject(request.data) : null,
        body: variant.compiled.body(request.data),
        locale: variant.locale,
        version: found.version,
      };
    } catch (error) {
      return { ok: false, reason: "render_failed", detail: error instanceof Error ? error.message : String(error) };
    }
  }

  return Object.assign(render, {
    /** A template got a version: the next render without a pinned version reads the latest again. */
    forget: (templateId: string) => latest.forget(templateId),
  });
}
export type Renderer = ReturnType<typeof createRenderer>;
