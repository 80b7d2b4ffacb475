import type { Channel } from "./channels.js";
import { safeTemplateSettings } from "./template-syntax.js";

/** Template ids that new templates may take: they appear in URLs, so no escaping is needed. */
export const TEMPLATE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

/** Longest subject: an RFC 5322 header line. Longest body: 64 KiB of template source. */
export const MAX_SUBJECT_LENGTH = 998;
export const MAX_BODY_TEMPLATE_LENGTH = 65_536;

/**
 * Eta settings shared by the check when a template is written and the renderer, so a template
 * that passed the check compiles the same way when it renders. Data is `it`, never `with`
 * scope; email bodies are HTML and escape what they interpolate, the other channels (and every
 * subject) are plain text and do not. The safe settings hold every template to the logic-less
 * subset of template-syntax.ts: compiling anything else throws a TemplateSyntaxError, and what
 * compiles is generated from the parsed tags, never the author's JavaScript.
 */
export const templateEngineOptions = (html: boolean) => ({
  autoEscape: html,
  autoTrim: false as const,
  useWith: false,
  varName: "it",
  ...safeTemplateSettings(),
});

export const isHtmlBody = (channel: Channel) => channel === "email";

/**
 * What a channel requires of a variant's subject: email needs one (it is the mail's Subject),
 * SMS cannot carry one, push and in-app use it as an optional title.
 */
export function subjectProblem(channel: Channel, subject: string | null): string | null {
  if (channel === "email" && (subject === null || subject.trim() === "")) return "an email variant needs a subject";
  if (channel === "sms" && subject !== null) return "an SMS variant has no subject";
  return null;
}
