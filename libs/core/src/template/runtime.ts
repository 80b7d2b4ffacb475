/**
 * The runtime: what the generated code calls, fresh for every render. Reads go through get(),
 * which walks the data's own properties only; loops and output are counted against
 * TEMPLATE_RENDER_LIMITS, and breaking one (or reading through a missing value) throws a
 * TemplateRenderError, which the renderer reports as a failed notification.
 */
import { filterFunctions, isMissing, outputText } from "./filters.js";
import { TemplateRenderError } from "./problems.js";

/** What one render may do: loop iterations in all, and characters of output. */
export const TEMPLATE_RENDER_LIMITS = { iterations: 100_000, outputChars: 1_048_576 };

export function createRuntime() {
  let iterations = 0;
  let printed = 0;
  return {
    f: filterFunctions,
    /** Own properties only (and the length of arrays and strings): nothing inherited is reachable. */
    get(base: unknown, steps: Array<string | number>, label: string): unknown {
      let value = base;
      for (let i = 0; i < steps.length; i++) {
        const step = steps[i] as string | number;
        if (isMissing(value)) {
          throw new TemplateRenderError(`${label}: a value before "${step}" is ${value === null ? "null" : "missing"}`);
        }
        if (step === "length" && (typeof value === "string" || Array.isArray(value))) value = value.length;
        else if (typeof value === "object" && Object.hasOwn(value as object, step)) {
          value = (value as Record<string | number, unknown>)[step];
        } else value = undefined;
      }
      return value;
    },
    out(value: unknown): string {
      const s = outputText(value);
      printed += s.length;
      if (printed > TEMPLATE_RENDER_LIMITS.outputChars) {
        throw new TemplateRenderError(`the output passes ${TEMPLATE_RENDER_LIMITS.outputChars} characters`);
      }
      return s;
    },
    each(value: unknown): readonly unknown[] {
      if (!Array.isArray(value)) return [];
      iterations += value.length;
      if (iterations > TEMPLATE_RENDER_LIMITS.iterations) {
        throw new TemplateRenderError(`loops pass ${TEMPLATE_RENDER_LIMITS.iterations} iterations`);
      }
      return value;
    },
    step(length: number): void {
      if (length > TEMPLATE_RENDER_LIMITS.outputChars) {
        throw new TemplateRenderError(`the output passes ${TEMPLATE_RENDER_LIMITS.outputChars} characters`);
      }
    },
    cmp(op: string, a: unknown, b: unknown): boolean {
      const comparable =
        (typeof a === "number" && typeof b === "number") || (typeof a === "string" && typeof b === "string");
      if (!comparable) return false;
      const x = a as number | string;
      const y = b as number | string;
      return op === "<" ? x < y : op === ">" ? x > y : op === "<=" ? x <= y : x >= y;
    },
  };
}
export type TemplateRuntime = ReturnType<typeof createRuntime>;
