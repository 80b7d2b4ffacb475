/**
 * BCP 47 language tags (RFC 5646) in their canonical form ("en-gb" becomes "en-GB"), or null
 * when the tag is not well-formed. Stored tags are canonical, so matching is exact.
 */
export function canonicalLocale(tag: string): string | null {
  if (tag.length === 0 || tag.length > 64) return null;
  try {
    const [canonical] = Intl.getCanonicalLocales(tag);
    return canonical ?? null;
  } catch {
    return null;
  }
}

/**
 * The variants to try for a user's locale, best first: RFC 4647 lookup (drop subtags from the
 * end, and a singleton left dangling with them), which ends at the bare language, then the
 * template's default. "zh-Hant-TW" tries zh-Hant-TW, zh-Hant, zh, then the default.
 */
export function localeFallbackChain(userLocale: string | null | undefined, defaultLocale: string): string[] {
  const chain: string[] = [];
  let tag = userLocale ?? "";
  while (tag !== "") {
    chain.push(tag);
    const cut = tag.lastIndexOf("-");
    tag = cut < 0 ? "" : tag.slice(0, cut);
    if (/-[A-Za-z0-9]$/.test(tag)) tag = tag.slice(0, -2);
  }
  if (!chain.includes(defaultLocale)) chain.push(defaultLocale);
  return chain;
}
