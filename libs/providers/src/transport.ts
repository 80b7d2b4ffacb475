import type { ProviderAnswer } from "@notify/core";

/**
 * Errors that happen before a request can reach the provider: the name does not resolve, the
 * host or network cannot be reached, the connection is refused, or TLS fails during the
 * handshake (the request is only written once TLS is up). Another attempt cannot duplicate a
 * send that failed this way.
 */
const NOT_SENT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EAI_FAIL",
  "EAI_NONAME",
  "EHOSTUNREACH",
  "EHOSTDOWN",
  "ENETUNREACH",
  "ENETDOWN",
  "EADDRNOTAVAIL",
  "ERR_SOCKET_CONNECTION_TIMEOUT",
  // undici's: connecting took too long (the request is written only once connected).
  "UND_ERR_CONNECT_TIMEOUT",
  "EPROTO",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "CERT_UNTRUSTED",
  "CERT_REJECTED",
  "CERT_SIGNATURE_FAILURE",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "HOSTNAME_MISMATCH",
]);

const NOT_SENT_PREFIXES = ["ERR_TLS_", "ERR_SSL_"];

/** Whether a transport error code says the request never left for the provider. */
export function neverSent(code: string | undefined): boolean {
  if (code === undefined) return false;
  return NOT_SENT_CODES.has(code) || NOT_SENT_PREFIXES.some((prefix) => code.startsWith(prefix));
}

/**
 * The result of a call that got no HTTP answer. A failure before the request could reach the
 * provider is transient and `notSent`: the worker retries it with backoff. Anything after (a
 * reset, a timeout once the request was written) may have been accepted: transient without
 * `notSent`, which the worker treats as an unknown outcome unless the provider is idempotent.
 * Where the client knows whether the request was handed to a connected socket (`written`),
 * that decides; otherwise the error's code does.
 */
export function transportFailure(
  provider: string,
  code: string | undefined,
  detail: string,
  written?: boolean,
): ProviderAnswer {
  const reason = `${provider} unreachable: ${code ?? detail}`;
  const notSent = written === undefined ? neverSent(code) : !written;
  return notSent ? { outcome: "transient", reason, notSent: true } : { outcome: "transient", reason };
}
