import { createPublicKey, type KeyObject, sign, verify } from "node:crypto";

/**
 * SendGrid's Signed Event Webhook: ECDSA P-256 with SHA-256 over the timestamp
 * header followed by the raw body, base64 DER in X-Twilio-Email-Event-Webhook-Signature.
 * node:crypto, not the SDK's pure-JS ECDSA: it is far faster.
 */
export const SENDGRID_SIGNATURE_HEADER = "x-twilio-email-event-webhook-signature";
export const SENDGRID_TIMESTAMP_HEADER = "x-twilio-email-event-webhook-timestamp";

/** The verification key as SendGrid shows it (base64 DER SubjectPublicKeyInfo) or as PEM. */
export function sendgridPublicKey(text: string): KeyObject {
  const trimmed = text.trim();
  const key = trimmed.startsWith("-----BEGIN")
    ? createPublicKey(trimmed)
    : createPublicKey({ key: Buffer.from(trimmed, "base64"), format: "der", type: "spki" });
  if (key.asymmetricKeyType !== "ec" || key.asymmetricKeyDetails?.namedCurve !== "prime256v1") {
    throw new Error("the SendGrid webhook key must be an EC P-256 public key");
  }
  return key;
}

const signed = (timestamp: string, body: Uint8Array): Buffer => Buffer.concat([Buffer.from(timestamp, "utf8"), body]);

export const signSendgridEvents = (privateKey: KeyObject, timestamp: string, body: Uint8Array): string =>
  sign("sha256", signed(timestamp, body), { key: privateKey, dsaEncoding: "der" }).toString("base64");

export function verifySendgridSignature(
  publicKey: KeyObject,
  signature: string,
  timestamp: string,
  body: Uint8Array,
): boolean {
  try {
    return verify(
      "sha256",
      signed(timestamp, body),
      { key: publicKey, dsaEncoding: "der" },
      Buffer.from(signature, "base64"),
    );
  } catch {
    // A signature that is not DER at all.
    return false;
  }
}
