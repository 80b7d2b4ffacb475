import { createHash } from "node:crypto";

/** Canonical JSON (sorted keys) so that the same body always hashes the same. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.keys(value as Record<string, unknown>)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value);
}

/** SHA-256 of the canonical body: tells a replay from an Idempotency-Key reused with another body. */
export const requestHash = (request: unknown): string =>
  createHash("sha256").update(canonicalJson(request)).digest("hex");
