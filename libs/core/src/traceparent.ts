/**
 * The trace id inside a W3C traceparent (`00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`),
 * lower case, or null when there is none: no header, another layout, or an all-zero id (which
 * the W3C Trace Context spec declares invalid). A later version may append fields after the
 * flags (`-...`); its first four fields keep their layout, so its trace id is read too. Version
 * `ff` is invalid by the spec.
 */
export function traceIdOf(traceparent: string | null | undefined): string | null {
  if (!traceparent) return null;
  const match = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/.exec(traceparent.trim());
  if (!match) return null;
  const [, version, traceId = "", parentId = "", , rest] = match;
  if (version === "ff" || (version === "00" && rest !== undefined)) return null;
  if (/^0+$/.test(traceId) || /^0+$/.test(parentId)) return null;
  return traceId;
}
