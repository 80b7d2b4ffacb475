import { CHANNELS, type FieldError, isHtmlBody, subjectProblem, templateEngineOptions } from "@notify/core";
import { Eta } from "eta";
import type { TemplateRequest } from "./schemas.js";

// The renderer's settings: what compiles here compiles there.
const engines = { html: new Eta(templateEngineOptions(true)), plain: new Eta(templateEngineOptions(false)) };

/**
 * A compile error without the generated code eta appends after a "====" rule: the message and
 * the place it names are what an author needs.
 */
function compileProblem(engine: Eta, source: string): string | null {
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

/**
 * The checks that span fields: one variant per (channel, locale), a subject where the channel
 * needs one and none where it cannot have one, a default-locale variant for every channel
 * (the end of each fallback chain), and every subject and body compiling with eta. Templates
 * are not run here: they are code, and running them is the renderer's job.
 */
export function contentProblems(input: TemplateRequest): FieldError[] {
  const problems: FieldError[] = [];
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
    const body = compileProblem(isHtmlBody(variant.channel) ? engines.html : engines.plain, variant.body_template);
    if (body) problems.push({ field: `${at}.body_template`, message: body });
    if (variant.subject !== null) {
      const subjectCompile = compileProblem(engines.plain, variant.subject);
      if (subjectCompile) problems.push({ field: `${at}.subject`, message: subjectCompile });
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
  return problems;
}
