import type { FieldError } from "../errors.js";

/**
 * Template data check. A missing value renders as nothing and a path through one fails the
 * render, so data is checked against the template's declared parameters before anything is
 * accepted. Dotted parameters ("order.id") require nested objects.
 */
export function missingParams(declared: readonly string[], data: Record<string, unknown>): FieldError[] {
  const errors: FieldError[] = [];
  for (const param of declared) {
    let value: unknown = data;
    for (const part of param.split(".")) {
      value = value !== null && typeof value === "object" ? (value as Record<string, unknown>)[part] : undefined;
    }
    if (value === undefined || value === null) {
      errors.push({ field: `data.${param}`, message: `template parameter "${param}" is required` });
    }
  }
  return errors;
}

/** Declared parameter names: dotted identifiers. */
export const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;
