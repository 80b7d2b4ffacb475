import {
  CHANNELS,
  checkTemplate,
  type FieldError,
  formatTemplateProblem,
  isHtmlBody,
  subjectProblem,
  templateEngineOptions,
} from "@notify/core";
import { Eta } from "eta";
import type { TemplateRequest } from "./schemas.js";

// The renderer's settings: what compiles here compiles there.
const engines = { html: new Eta(templateEngineOptions(true)), plain: new Eta(templateEngineOptions(false)) };

/**
 * Why a template source is refused: the first place it leaves the logic-less subset (line,
 * column and token), else a compile error without the generated code eta appends after a
 * "====" rule. The subset check comes first and is what refuses code; compiling is a second
 * guard (the engine checks again and compiles only code generated from the parsed tags).
 */
function templateProblem(engine: Eta, source: string): string | null {
  const check = checkTemplate(source);
  if (!check.ok) return `not allowed: ${formatTemplateProblem(check.problem)}`;
  try {
    engine.compile(source);
    return null;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const lines = message.split("\n");
    const rule = lines.findIndex((line) => line.startsWith("===="));
    const text = (rule < 0 ? lines : lines.slice(0, rule))
      .map((line) => line.trim())
      .filter(Boolean)
      .join(" ");
    return `does not compile: ${text.slice(0, 300)}`;
  }
}

export interface ContentProblems {
  fields: FieldError[];
  /** Whether a subject or body is refused: the request is answered 422 template_invalid. */
  template: boolean;
}

/**
 * The checks that span fields: one variant per (channel, locale), a subject where the channel
 * needs one and none where it cannot have one, a default-locale variant for every channel
 * (the end of each fallback chain), and every subject and body within the template subset
 * (checkTemplate in @notify/core). Templates are not run here.
 */
export function contentProblems(input: TemplateRequest): ContentProblems {
  const problems: FieldError[] = [];
  let template = false;
  const seen = new Map<string, number>();
  input.variants.forEach((variant, index) => {
    const at = `variants.${index}`;
    const key = `${variant.channel}\u0000${variant.locale}`;
    const first = seen.get(key);
    if (first !== undefined) {
      problems.push({
        field: `${at}.locale`,
        message: `repeats the ${variant.channel} variant for ${variant.locale} (variants.${first})`,
      });
    } else seen.set(key, index);
    const subject = subjectProblem(variant.channel, variant.subject);
    if (subject) problems.push({ field: `${at}.subject`, message: subject });
    const body = templateProblem(isHtmlBody(variant.channel) ? engines.html : engines.plain, variant.body_template);
    if (body) {
      template = true;
      problems.push({ field: `${at}.body_template`, message: body });
    }
    if (variant.subject !== null) {
      const subjectTemplate = templateProblem(engines.plain, variant.subject);
      if (subjectTemplate) {
        template = true;
        problems.push({ field: `${at}.subject`, message: subjectTemplate });
      }
    }
  });
  for (const channel of CHANNELS) {
    const variants = input.variants.filter((v) => v.channel === channel);
    if (variants.length > 0 && !variants.some((v) => v.locale === input.default_locale)) {
      problems.push({
        field: "variants",
        message: `the ${channel} variants need one in the default locale ${input.default_locale}`,
      });
    }
  }
  return { fields: problems, template };
}
