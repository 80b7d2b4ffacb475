/**
 * The filters a template may call: what the parser accepts of each call (the literals after
 * the value) and what each does to a value when a template renders. Filters never throw:
 * a value a filter cannot read comes out as its text.
 */

/** The filters a template may call, with the literals each takes after its value. */
export const TEMPLATE_FILTERS = {
  upper: { min: 0, max: 0, args: [] },
  lower: { min: 0, max: 0, args: [] },
  trim: { min: 0, max: 0, args: [] },
  /** fallback(value, "literal"): the literal when value is missing, null or "". */
  fallback: { min: 1, max: 1, args: ["any"] },
  /** number(value, digits?): a number with a fixed count of decimals (0-10). */
  number: { min: 0, max: 1, args: ["digits"] },
  /** date(value, "date" | "datetime" | "iso"): an ISO 8601 string or epoch ms, in UTC. */
  date: { min: 0, max: 1, args: ["date-style"] },
  /** join(array, separator?): the items as text, ", " between them by default. */
  join: { min: 0, max: 1, args: ["string"] },
} as const satisfies Record<string, { min: number; max: number; args: readonly string[] }>;
export type TemplateFilterName = keyof typeof TEMPLATE_FILTERS;
export const isFilterName = (name: string): name is TemplateFilterName => Object.hasOwn(TEMPLATE_FILTERS, name);
export const DATE_STYLES = ["date", "datetime", "iso"];

export const isMissing = (value: unknown) => value === undefined || value === null;

/** A value as output text: strings as they are, numbers and booleans printed, nothing for none. */
export function outputText(value: unknown): string {
  switch (typeof value) {
    case "string":
      return value;
    case "number":
    case "boolean":
    case "bigint":
      return String(value);
    case "object":
      if (value === null) return "";
      try {
        return JSON.stringify(value) ?? "";
      } catch {
        return "";
      }
    default:
      return "";
  }
}

const pad = (n: number) => String(n).padStart(2, "0");

/** What each filter does; the generated code calls them as `__n.f.<name>(value, literal…)`. */
export const filterFunctions = {
  upper: (value: unknown) => outputText(value).toUpperCase(),
  lower: (value: unknown) => outputText(value).toLowerCase(),
  trim: (value: unknown) => outputText(value).trim(),
  fallback: (value: unknown, otherwise: unknown) => (isMissing(value) || value === "" ? otherwise : value),
  number: (value: unknown, digits?: number) => {
    const n =
      typeof value === "number" ? value : typeof value === "string" && value.trim() ? Number(value) : Number.NaN;
    if (!Number.isFinite(n)) return outputText(value);
    return digits === undefined ? String(n) : n.toFixed(digits);
  },
  date: (value: unknown, style = "date") => {
    const date = typeof value === "string" || typeof value === "number" ? new Date(value) : null;
    if (!date || Number.isNaN(date.getTime())) return outputText(value);
    if (style === "iso") return date.toISOString();
    const day = `${date.getUTCFullYear()}-${pad(date.getUTCMonth() + 1)}-${pad(date.getUTCDate())}`;
    return style === "datetime" ? `${day} ${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())} UTC` : day;
  },
  join: (value: unknown, separator = ", ") =>
    Array.isArray(value) ? value.map(outputText).join(separator) : outputText(value),
} satisfies Record<TemplateFilterName, (value: unknown, ...extra: never[]) => unknown>;
