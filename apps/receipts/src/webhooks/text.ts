/**
 * Postgres text and jsonb cannot hold U+0000, and jsonb refuses an unpaired UTF-16 surrogate:
 * a provider's value holding one must be caught before it reaches a statement, where it would
 * fail the whole transaction (a 500 for a batch of good events).
 */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, "g");

export const storable = (text: string): boolean => !text.includes("\u0000") && !LONE_SURROGATE.test(text);

/** The text with every U+0000 and unpaired surrogate replaced by U+FFFD. */
export const makeStorable = (text: string): string =>
  storable(text) ? text : text.replaceAll("\u0000", "\ufffd").replace(LONE_SURROGATES, "\ufffd");
