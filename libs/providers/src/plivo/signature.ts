import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Plivo's callback signatures: V2 is HMAC-SHA256(auth token, URL without its
 * query + nonce); V3 covers the URL with its query sorted, then the sorted POST parameters, then
 * "." + nonce, and its header may carry several comma-separated signatures (one per auth token
 * during a rotation). Both are base64.
 */

/** Form parameters as posted: a name may repeat. */
export type FormParams = Record<string, string[]>;

/**
 * The posted parameters by name, on an object with no prototype: a parameter named `toString`,
 * `constructor` or `__proto__` is just a parameter, never an inherited method or the prototype.
 */
export const formParams = (body: URLSearchParams): FormParams => {
  const params: FormParams = Object.create(null);
  for (const [key, value] of body) params[key] = [...(params[key] ?? []), value];
  return params;
};

const hmac = (authToken: string, data: string): string =>
  createHmac("sha256", authToken).update(data, "utf8").digest("base64");

const withoutQuery = (url: URL): string => `${url.protocol}//${url.host}${url.pathname}`;

const sortedPairs = (params: FormParams): Array<[string, string]> =>
  Object.keys(params)
    .sort()
    .flatMap((key) => [...(params[key] ?? [])].sort().map((value): [string, string] => [key, value]));

/** The string V3 signs, exactly as Plivo builds it (its SDKs agree; tested against the node one). */
export function plivoV3Base(method: "GET" | "POST", url: string, params: FormParams): string {
  const parsed = new URL(url);
  const query = formParams(parsed.searchParams);
  if (method === "GET") {
    for (const [key, values] of Object.entries(params)) query[key] = [...(query[key] ?? []), ...values];
  }
  const queryString = sortedPairs(query)
    .map(([key, value]) => `${key}=${value}`)
    .join("&");
  if (method === "GET") return queryString === "" ? withoutQuery(parsed) : `${withoutQuery(parsed)}?${queryString}`;
  const postString = sortedPairs(params)
    .map(([key, value]) => `${key}${value}`)
    .join("");
  let base = withoutQuery(parsed);
  if (queryString !== "" || postString !== "") base += `?${queryString}`;
  if (queryString !== "" && postString !== "") base += ".";
  return base + postString;
}

export const plivoSignatureV2 = (authToken: string, url: string, nonce: string): string =>
  hmac(authToken, withoutQuery(new URL(url)) + nonce);

export const plivoSignatureV3 = (
  authToken: string,
  method: "GET" | "POST",
  url: string,
  params: FormParams,
  nonce: string,
): string => hmac(authToken, `${plivoV3Base(method, url, params)}.${nonce}`);

// The SDK's helpers compare with ===, which leaks how much of a guess matched.
const sameSignature = (expected: string, given: string): boolean => {
  const a = Buffer.from(expected, "base64");
  const b = Buffer.from(given.trim(), "base64");
  return a.length === b.length && timingSafeEqual(a, b);
};

export interface PlivoCallback {
  method: "GET" | "POST";
  /** The URL Plivo called, as Plivo saw it (the public one behind a proxy). */
  url: string;
  params: FormParams;
  headers: (name: string) => string | undefined;
}

/** Which signature verified: V3 also covers the query and the parameters, V2 only the path. */
export type PlivoVerification = "v3" | "v2" | "missing" | "invalid";

/** V3 when present (it also covers the parameters), else V2. */
export function verifyPlivoSignature(authToken: string, callback: PlivoCallback): PlivoVerification {
  const v3 = callback.headers("x-plivo-signature-v3");
  const v3Nonce = callback.headers("x-plivo-signature-v3-nonce");
  if (v3 !== undefined && v3Nonce !== undefined) {
    const expected = plivoSignatureV3(authToken, callback.method, callback.url, callback.params, v3Nonce);
    return v3.split(",").some((given) => sameSignature(expected, given)) ? "v3" : "invalid";
  }
  const v2 = callback.headers("x-plivo-signature-v2");
  const v2Nonce = callback.headers("x-plivo-signature-v2-nonce");
  if (v2 !== undefined && v2Nonce !== undefined) {
    return sameSignature(plivoSignatureV2(authToken, callback.url, v2Nonce), v2) ? "v2" : "invalid";
  }
  return "missing";
}
