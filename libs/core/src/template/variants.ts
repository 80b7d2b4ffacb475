/** What a stored template and its variants may be, apart from the language of their text. */
import type { Channel } from "../channels.js";

/** Template ids that new templates may take: they appear in URLs, so no escaping is needed. */
export const TEMPLATE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

/** Longest subject: an RFC 5322 header line. Longest body: 64 KiB of template source. */
export const MAX_SUBJECT_LENGTH = 998;
export const MAX_BODY_TEMPLATE_LENGTH = 65_536;

/** Email bodies are HTML: they render with escaping (templateEngineOptions(true)). */
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
