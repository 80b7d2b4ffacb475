import { type ProviderAnswer, TIMED_OUT, withDeadline } from "@notify/core";
import { MailService } from "@sendgrid/mail";
import { htmlToText } from "../email-text.js";
import type { OutboundMessage, Provider } from "../provider.js";
import { transportFailure } from "../transport.js";
import { SendgridHttpClient, SendgridResponseError, SendgridTransportError } from "./http-client.js";

export interface SendgridConfig {
  apiKey: string;
  /** API origin: https://api.sendgrid.com, https://api.eu.sendgrid.com, or a sandbox URL. */
  baseUrl: string;
  /** Sender address; must be a verified sender or domain at SendGrid. */
  from: string;
  fromName?: string;
  /** Deadline for one send, from the call to SendGrid's answer. */
  timeoutMs: number;
}

/** An answer that did not come in time, once the request was written: an unknown outcome. */
const TIMEOUT_CODES = new Set(["UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT", "ETIMEDOUT"]);

const firstErrorMessage = (body: unknown): string | undefined => {
  const errors = (body as { errors?: unknown } | null)?.errors;
  const message = Array.isArray(errors) ? (errors[0] as { message?: unknown } | undefined)?.message : undefined;
  return typeof message === "string" && message.length > 0 ? message : undefined;
};

const retryAfterMs = (headers: Record<string, unknown>): { retryAfterMs?: number } => {
  const seconds = Number(headers["retry-after"]);
  return Number.isFinite(seconds) && seconds >= 0 ? { retryAfterMs: seconds * 1000 } : {};
};

/**
 * Where a redirect pointed, for the failure's reason (status rows, dead letters, logs): its
 * origin and path only, since a query or user info may carry credentials, and bounded.
 */
function redirectTarget(location: unknown): string {
  if (typeof location !== "string") return "";
  try {
    const url = new URL(location, "http://base.invalid");
    const where = url.origin === "http://base.invalid" ? url.pathname : `${url.origin}${url.pathname}`;
    return ` to ${where.length > 200 ? `${where.slice(0, 200)}...` : where}`;
  } catch {
    return "";
  }
}

/**
 * Failure classes: 408, 429 and 5xx retry, every other 4xx is final. A 3xx (a proxy or a wrong
 * base URL) means the request was redirected, not processed: sending again reaches the same
 * redirect, and it is never followed.
 */
function classifyResponse({ code: status, response }: SendgridResponseError): ProviderAnswer {
  if (status >= 300 && status < 400) {
    const to = redirectTarget(response.headers.location);
    return {
      outcome: "permanent",
      reason: `sendgrid ${status}: redirected${to}, not followed (check the base URL)`,
      status,
    };
  }
  if (status === 401) {
    return { outcome: "permanent", reason: "sendgrid 401: API key invalid, expired or revoked", status };
  }
  const reason = `sendgrid ${status}: ${firstErrorMessage(response.body) ?? "no error detail"}`;
  if (status === 408 || status === 429 || status >= 500) {
    return { outcome: "transient", reason, status, ...retryAfterMs(response.headers) };
  }
  return { outcome: "permanent", reason, status };
}

export function createSendgridProvider(config: SendgridConfig): Provider {
  // The client's own timeouts only fire on an idle socket, so withDeadline() is what bounds a
  // call; they make the socket of a send we stopped waiting for go (http-client.ts).
  // Connecting gets half the deadline: a connection that cannot be made in time (a blackholed
  // route, a handshake that never ends) then fails as never sent, and is retried, before the
  // deadline calls the send an unknown outcome.
  const client = new SendgridHttpClient({
    connectMs: Math.max(1, Math.floor(config.timeoutMs / 2)),
    timeoutMs: config.timeoutMs,
  });
  client.setApiKey(config.apiKey);
  // setApiKey() resets the base URL to the region default, so the override must follow it.
  client.setDefaultRequest("baseUrl", config.baseUrl);
  // A fresh service, not the module singleton: two providers must never share a key or a URL.
  const mail = new MailService();
  mail.setClient(client);
  const from = config.fromName === undefined ? config.from : { email: config.from, name: config.fromName };
  const timedOut: ProviderAnswer = { outcome: "transient", reason: `sendgrid timed out after ${config.timeoutMs} ms` };

  // Reasons end up in status rows and logs; a proxy echoing request headers must not leak the key.
  const redact = (result: ProviderAnswer): ProviderAnswer =>
    result.outcome === "accepted" || config.apiKey === ""
      ? result
      : { ...result, reason: result.reason.replaceAll(config.apiKey, "[redacted]") };

  const send = async (message: OutboundMessage): Promise<ProviderAnswer> => {
    if (message.subject === null) return { outcome: "permanent", reason: "an email needs a subject" };
    const text = htmlToText(message.body);
    try {
      const answer = await withDeadline(
        mail.send({
          to: message.to,
          from,
          subject: message.subject,
          html: message.body,
          // SendGrid rejects empty content blocks, e.g. the text of an image-only body.
          ...(text.length > 0 ? { text } : {}),
          customArgs: { notification_id: message.notificationId, channel: message.channel },
          categories: [message.category],
          ...(message.headers === undefined ? {} : { headers: { ...message.headers } }),
        }),
        config.timeoutMs,
      );
      if (answer === TIMED_OUT) return timedOut;
      // SendGrid always sets it; were it missing, the mail is still queued and a retry would duplicate it.
      const providerId = answer[0].headers["x-message-id"];
      return { outcome: "accepted", providerId: typeof providerId === "string" ? providerId : "" };
    } catch (error) {
      if (error instanceof SendgridResponseError) return classifyResponse(error);
      if (error instanceof SendgridTransportError) {
        if (error.written && error.code !== undefined && TIMEOUT_CODES.has(error.code)) return timedOut;
        return transportFailure("sendgrid", error.code, error.message, error.written);
      }
      // Only building the request is left: the same message would fail the same way again.
      return { outcome: "permanent", reason: `sendgrid request not built: ${String(error)}` };
    }
  };

  return {
    name: "sendgrid",
    channel: "email",
    send: async (message) => redact(await send(message)),
    close: () => client.close(),
  };
}
