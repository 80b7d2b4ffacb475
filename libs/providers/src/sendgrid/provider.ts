import { Client } from "@sendgrid/client";
import { MailService } from "@sendgrid/mail";
import { TIMED_OUT, withDeadline } from "../deadline.js";
import { htmlToText } from "../email-text.js";
import type { OutboundMessage, Provider, SendResult } from "../provider.js";
import { transportFailure } from "../transport.js";
import { sendAgents } from "./agents.js";

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

/** What @sendgrid/client rejects with when SendGrid answered with a status >= 400. */
interface SendgridResponseError {
  code: number;
  response: { headers: Record<string, unknown>; body: unknown };
}

const isResponseError = (error: unknown): error is SendgridResponseError =>
  error instanceof Error &&
  typeof (error as Partial<SendgridResponseError>).code === "number" &&
  typeof (error as Partial<SendgridResponseError>).response === "object";

// @sendgrid/client sends through axios; every transport failure (refused, reset, DNS, axios's
// own timeout) arrives as an AxiosError. axios is not a dependency of ours, hence the duck type.
const isTransportError = (
  error: unknown,
): error is Error & { code?: string; response?: { status: number; headers: Record<string, unknown> } } =>
  error instanceof Error && (error as { isAxiosError?: unknown }).isAxiosError === true;

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

/** Failure classes: 408, 429 and 5xx retry, every other 4xx is final. */
function classifyResponse({ code: status, response }: SendgridResponseError): SendResult {
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
  const client = new Client();
  client.setApiKey(config.apiKey);
  // setApiKey() resets the base URL to the region default, so the override must follow it.
  client.setDefaultRequest("baseUrl", config.baseUrl);
  // Mail Send answers 202 or an error, never a redirect; with none to follow axios uses node's
  // http module directly instead of wrapping it in follow-redirects (a fifth of the client's
  // CPU per send). A redirect (a proxy or a wrong base URL) is answered below: nothing was sent.
  // (The defaults reach axios as they are; their typing names only SendGrid's own options.)
  // Connections of its own, whatever another package does to axios's defaults (agents.ts).
  const { httpAgent, httpsAgent } = sendAgents(config.timeoutMs);
  const axiosDefaults = { maxRedirects: 0, httpAgent, httpsAgent };
  client.setDefaultRequest(axiosDefaults as unknown as Parameters<Client["setDefaultRequest"]>[0]);
  // A fresh service, not the module singleton: two providers must never share a key or a URL.
  const mail = new MailService();
  mail.setClient(client);
  // axios's timeout only fires on an idle socket, so withDeadline() is what bounds the call;
  // this one makes axios drop the socket of a send we stopped waiting for.
  mail.setTimeout(config.timeoutMs);
  const from = config.fromName === undefined ? config.from : { email: config.from, name: config.fromName };
  const timedOut: SendResult = { outcome: "transient", reason: `sendgrid timed out after ${config.timeoutMs} ms` };

  // Reasons end up in status rows and logs; a proxy echoing request headers must not leak the key.
  const redact = (result: SendResult): SendResult =>
    result.outcome === "accepted" || config.apiKey === ""
      ? result
      : { ...result, reason: result.reason.replaceAll(config.apiKey, "[redacted]") };

  const send = async (message: OutboundMessage): Promise<SendResult> => {
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
        }),
        config.timeoutMs,
      );
      if (answer === TIMED_OUT) return timedOut;
      // SendGrid always sets it; were it missing, the mail is still queued and a retry would duplicate it.
      const providerId = answer[0].headers["x-message-id"];
      return { outcome: "accepted", providerId: typeof providerId === "string" ? providerId : "" };
    } catch (error) {
      if (isResponseError(error)) return classifyResponse(error);
      if (isTransportError(error)) {
        // A 3xx (@sendgrid/client passes on what is not an error status as axios's error): the
        // request was redirected, not processed. Sending again reaches the same redirect.
        const status = error.response?.status;
        if (status !== undefined && status >= 300 && status < 400) {
          const to = redirectTarget(error.response?.headers.location);
          return {
            outcome: "permanent",
            reason: `sendgrid ${status}: redirected${to}, not followed (check the base URL)`,
            status,
          };
        }
        if (error.code === "ECONNABORTED" || error.code === "ETIMEDOUT") return timedOut;
        return transportFailure("sendgrid", error.code, error.message);
      }
      // Only building the request is left: the same message would fail the same way again.
      return { outcome: "permanent", reason: `sendgrid request not built: ${String(error)}` };
    }
  };

  return {
    name: "sendgrid",
    channel: "email",
    send: async (message) => redact(await send(message)),
    close: async () => {
      httpAgent.destroy();
      httpsAgent.destroy();
    },
  };
}
