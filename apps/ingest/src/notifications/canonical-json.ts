import { hash } from "node:crypto";

/**
 * Canonical JSON (sorted keys) so that the same body always hashes the same. The stored request
 * hashes depend on this exact text: a change to it turns every retry across a deploy into a 422.
 * Built by concatenation rather than arrays joined, as it runs for every request.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) {
    let out = "[";
    // An undefined item or a hole is written as nothing, as Array.prototype.join writes it.
    for (let i = 0; i < value.length; i++) out += (i === 0 ? "" : ",") + (canonicalJson(value[i]) ?? "");
    return `${out}]`;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  let out = "{";
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i] as string;
    out += `${i === 0 ? "" : ","}${JSON.stringify(key)}:${canonicalJson(record[key])}`;
  }
  return `${out}}`;
}

/**
 * SHA-256 of the canonical body: tells a replay from an Idempotency-Key reused with another body.
 * One-shot `hash()`, as it runs for every request and a Hash object costs more.
 */
export const requestHash = (request: unknown): string => hash("sha256", canonicalJson(request), "hex");
