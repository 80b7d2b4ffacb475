import * as v from "valibot";
import { AppError, type FieldError } from "./errors.js";

/** Validates input against a valibot schema: a 400 problem listing every invalid field. */
export function validate<S extends v.GenericSchema>(schema: S, input: unknown): v.InferOutput<S> {
  // valibot's object schemas take an array for an object (its indexes as keys).
  if (Array.isArray(input) && "entries" in schema) {
    const fields = [{ field: "(body)", message: "must be a JSON object" }];
    throw new AppError("validation_failed", "(body): must be a JSON object", { fields });
  }
  const result = v.safeParse(schema, input, { abortEarly: false });
  if (result.success) return result.output;
  const fields: FieldError[] = result.issues.map((issue) => {
    const path = v.getDotPath(issue);
    const field = path ?? "(body)";
    // An object schema reports three faults under its own type: a value that is no object, a
    // required key that is missing (expected: the key's name) and, when strict, a key it does
    // not know (expected: never).
    if (issue.type === "strict_object" || issue.type === "object") {
      if (path === null) return { field, message: "must be a JSON object" };
      if (issue.expected === "never") return { field, message: `unknown field "${path}"` };
      if (issue.input === undefined) return { field, message: "is required" };
    }
    return { field, message: issue.message };
  });
  throw new AppError("validation_failed", fields.map((f) => `${f.field}: ${f.message}`).join("; "), { fields });
}
