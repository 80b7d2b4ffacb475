import { AppError, CHANNELS, type Channel } from "@notify/core";
import { type Database, readTemplateVersion, type TemplateVersionRecord } from "@notify/db";
import { toAppError } from "@notify/http";
import type { TemplateResponse } from "./schemas.js";

/** Variants in a stable order (channel order, then locale), so equal content reads equal. */
export const sortVariants = <T extends { channel: Channel; locale: string }>(variants: readonly T[]): T[] =>
  [...variants].sort(
    (a, b) =>
      CHANNELS.indexOf(a.channel) - CHANNELS.indexOf(b.channel) || (a.locale < b.locale ? -1 : +(a.locale > b.locale)),
  );

/** A stored version as the API shows it: its variants in their stable order. */
export const toTemplateResponse = (record: TemplateVersionRecord): TemplateResponse => ({
  ...record,
  variants: sortVariants(record.variants),
});

/** GET /api/v1/templates/{id} (latest) and /templates/{id}/versions/{version}. */
export async function getTemplate(database: Database, templateId: string, version: number | null) {
  let found: TemplateVersionRecord | null;
  try {
    found = await readTemplateVersion(database, templateId, version);
  } catch (error) {
    throw toAppError(error);
  }
  if (!found) {
    throw new AppError(
      "not_found",
      version === null
        ? `template "${templateId}" does not exist`
        : `template "${templateId}" has no version ${version}`,
    );
  }
  return toTemplateResponse(found);
}
