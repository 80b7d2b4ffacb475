import {
  AppError,
  CHANNELS,
  canonicalLocale,
  MAX_BODY_TEMPLATE_LENGTH,
  MAX_DEADLINE_SECONDS,
  MAX_SUBJECT_LENGTH,
  PARAM_NAME,
  TEMPLATE_ID_PATTERN,
} from "@notify/core";
import * as v from "valibot";
import { offsetPageQuery } from "../pagination.js";

export const MAX_VARIANTS = 200;
export const MAX_PARAMS = 100;

export const TemplateId = v.pipe(
  v.string("template_id must be a string"),
  v.regex(TEMPLATE_ID_PATTERN, "template_id must be 1-128 of A-Z, a-z, 0-9, '_', '.', ':', '-'"),
);

/**
 * The {id} of /templates/{id}. Reading looks up any id a notification may name; writing needs
 * one of the URL-safe ids new templates take (a 400 naming it).
 */
export function parseTemplateIdParam(value: string, purpose: "read" | "write"): string {
  if (purpose === "write") {
    const result = v.safeParse(TemplateId, value);
    if (result.success) return result.output;
    const message = result.issues[0]?.message ?? "invalid template id";
    throw new AppError("validation_failed", `path: ${message}`, { fields: [{ field: "template_id", message }] });
  }
  if (!/^[\x21-\x7e]{1,256}$/.test(value)) throw new AppError("not_found", `template "${value}" does not exist`);
  return value;
}

/** A body may repeat the id of its path, so a GET answer can be sent back as is. */
export function checkBodyTemplateId(pathId: string, bodyId: string | undefined): void {
  if (bodyId === undefined || bodyId === pathId) return;
  throw new AppError("validation_failed", "template_id in the body differs from the path", {
    fields: [{ field: "template_id", message: `must be "${pathId}" (the path's template id) or absent` }],
  });
}

/** The {version} of /templates/{id}/versions/{version}. */
export function parseVersionParam(templateId: string, value: string): number {
  const version = /^[1-9]\d{0,8}$/.test(value) ? Number(value) : null;
  if (version === null) throw new AppError("not_found", `template "${templateId}" has no version "${value}"`);
  return version;
}

const locale = (field: string) =>
  v.pipe(
    v.string(`${field} must be a string`),
    v.check((tag) => canonicalLocale(tag) !== null, `${field} must be a BCP 47 language tag, e.g. en-GB`),
    v.transform((tag) => canonicalLocale(tag) as string),
  );

/** One (channel, locale) rendering: subject and eta body. */
export const TemplateVariant = v.strictObject({
  channel: v.picklist(CHANNELS, `channel must be one of ${CHANNELS.join(", ")}`),
  locale: locale("locale"),
  /** Email: required, the Subject. Push and in-app: optional title. SMS: none. */
  subject: v.optional(
    v.nullable(
      v.pipe(
        v.string("subject must be a string"),
        v.maxLength(MAX_SUBJECT_LENGTH, `subject must be at most ${MAX_SUBJECT_LENGTH} characters`),
      ),
    ),
    null,
  ),
  /** An eta template; data is `it` (`<%= it.name %>`). Email bodies are HTML and escape output. */
  body_template: v.pipe(
    v.string("body_template must be a string"),
    v.minLength(1, "body_template must not be empty"),
    v.maxLength(MAX_BODY_TEMPLATE_LENGTH, `body_template must be at most ${MAX_BODY_TEMPLATE_LENGTH} characters`),
  ),
});
export type TemplateVariant = v.InferOutput<typeof TemplateVariant>;

/**
 * Body of PUT /api/v1/templates/{id}: the whole content of the next version. Each channel
 * needs a variant in the default locale, the end of every locale fallback chain.
 */
export const TemplateRequest = v.strictObject({
  template_id: v.optional(TemplateId),
  default_locale: v.optional(locale("default_locale"), "en"),
  /** Data parameters every notification must carry; dotted names ("order.id") are nested. */
  params: v.optional(
    v.pipe(
      v.array(
        v.pipe(
          v.string("params entries must be strings"),
          v.regex(PARAM_NAME, "params entries must be dotted identifiers"),
        ),
        "params must be an array",
      ),
      v.maxLength(MAX_PARAMS, `params may hold at most ${MAX_PARAMS} names`),
      v.checkItems((item, index, array) => array.indexOf(item) === index, "params must not repeat"),
    ),
    [],
  ),
  /** Notifications of this version without a deliver_by of their own are never sent later than this after acceptance. */
  ttl_seconds: v.optional(
    v.nullable(
      v.pipe(
        v.number("ttl_seconds must be a number"),
        v.integer("ttl_seconds must be an integer"),
        v.minValue(1, "ttl_seconds must be at least 1"),
        v.maxValue(MAX_DEADLINE_SECONDS, `ttl_seconds must be at most ${MAX_DEADLINE_SECONDS} (28 days)`),
      ),
    ),
    null,
  ),
  variants: v.pipe(
    v.array(TemplateVariant, "variants must be an array"),
    v.minLength(1, "variants must not be empty"),
    v.maxLength(MAX_VARIANTS, `variants may hold at most ${MAX_VARIANTS} entries`),
  ),
});
export type TemplateRequest = v.InferOutput<typeof TemplateRequest>;

/** A template version as the API shows it. */
export const TemplateResponse = v.strictObject({
  template_id: v.string(),
  version: v.number(),
  latest_version: v.number(),
  default_locale: v.string(),
  params: v.array(v.string()),
  ttl_seconds: v.nullable(v.number()),
  variants: v.array(
    v.strictObject({
      channel: v.picklist(CHANNELS),
      locale: v.string(),
      subject: v.nullable(v.string()),
      body_template: v.string(),
    }),
  ),
  /** When this version was written. */
  created_at: v.string(),
});
export type TemplateResponse = v.InferOutput<typeof TemplateResponse>;

/** Query of GET /api/v1/templates (offset pagination). */
export const ListTemplatesQuery = v.strictObject({
  ...offsetPageQuery,
});
export type ListTemplatesQuery = v.InferOutput<typeof ListTemplatesQuery>;

/** One entry of the template list. */
export const TemplateSummary = v.strictObject({
  template_id: v.string(),
  latest_version: v.number(),
  default_locale: v.string(),
  created_at: v.string(),
  updated_at: v.string(),
});
export type TemplateSummary = v.InferOutput<typeof TemplateSummary>;
