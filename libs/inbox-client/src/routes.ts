/** The inbox routes' types, generated from the ingest app's OpenAPI document (scripts/generate.ts). */
export type { paths } from "./generated/openapi.js";
