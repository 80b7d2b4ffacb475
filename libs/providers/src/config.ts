import { readFileSync } from "node:fs";
import type { Channel } from "@notify/core";
import * as v from "valibot";
import type { InAppConfig } from "./inapp/provider.js";
import type { Provider } from "./provider.js";
import { DEFAULT_PUSH_HOSTS } from "./webpush/ssrf.js";

/**
 * Per channel, which provider the workers call: the real one, its local sandbox (same SDK, a
 * local base URL and relaxed address checks), or none (the channel's work waits in its queue).
 */
const mode = <T extends string>(real: T) =>
  v.optional(v.picklist([real, "sandbox", "off"], `must be ${real}, sandbox or off`), "off");
const secret = () => v.optional(v.pipe(v.string(), v.minLength(1, "must not be empty")));
const httpUrl = (fallback: string) => v.pipe(v.optional(v.string(), fallback), v.url("must be a URL"));
const intIn = (fallback: number, min: number, max: number) =>
  v.pipe(
    v.optional(v.string(), String(fallback)),
    v.regex(/^\d+$/, "must be an integer"),
    v.transform(Number),
    v.number(),
    v.minValue(min, `must be >= ${min}`),
    v.maxValue(max, `must be <= ${max}`),
  );
const flag = (fallback: boolean) =>
  v.pipe(
    v.optional(v.picklist(["true", "false", "1", "0"], "must be true or false"), fallback ? "true" : "false"),
    v.transform((value) => value === "true" || value === "1"),
  );
const list = (fallback: string[]) =>
  v.pipe(
    v.optional(v.string(), fallback.join(",")),
    v.transform((s) =>
      s
        .split(",")
        .map((e) => e.trim())
        .filter((e) => e !== ""),
    ),
  );
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** Environment entries for the channel providers; spread into an app's config object. */
export const channelProviderEnv = {
  /** sendgrid | sandbox | off. */
  EMAIL_PROVIDER: mode("sendgrid"),
  /** Secret, never logged. Required unless EMAIL_PROVIDER=off. */
  SENDGRID_API_KEY: secret(),
  /** https://api.sendgrid.com, https://api.eu.sendgrid.com, or the sandbox. */
  SENDGRID_BASE_URL: httpUrl("https://api.sendgrid.com"),
  /** Sender address of every email. */
  EMAIL_FROM: v.optional(v.pipe(v.string(), v.email("must be an email address")), "notifications@example.com"),
  /** Sender name shown with EMAIL_FROM. */
  EMAIL_FROM_NAME: v.optional(v.string(), "Notify"),
  /** smtp | sandbox | off: where email goes when EMAIL_PROVIDER cannot take a send. */
  EMAIL_FAILOVER_PROVIDER: mode("smtp"),
  /**
   * Secret, never logged. The relay: smtp://user:password@host:port (STARTTLS, which only the
   * sandbox may skip) or smtps://… (TLS from the start), credentials percent-encoded. Required
   * unless EMAIL_FAILOVER_PROVIDER=off.
   */
  SMTP_URL: secret(),
  /** PEM file of an extra CA to trust for the SMTP relay, besides the public ones. */
  SMTP_CA_FILE: v.optional(v.pipe(v.string(), v.minLength(1))),

  /** plivo | sandbox | off. */
  SMS_PROVIDER: mode("plivo"),
  /** Plivo account id. Required unless SMS_PROVIDER=off. */
  PLIVO_AUTH_ID: secret(),
  /** Secret, never logged; also what receipts verifies Plivo's report signatures with. */
  PLIVO_AUTH_TOKEN: secret(),
  /** https://api.plivo.com, or the sandbox. */
  PLIVO_BASE_URL: httpUrl("https://api.plivo.com"),
  /** Sender: a Plivo number (E.164) or an approved sender id. */
  SMS_FROM: v.optional(
    v.pipe(v.string(), v.regex(/^(\+[1-9]\d{6,14}|[A-Za-z0-9]{3,11})$/, "must be E.164 or a sender id")),
  ),
  /** Where Plivo posts delivery reports: receipts' /webhooks/plivo as Plivo reaches it. Unset: no reports. */
  PLIVO_REPORT_URL: v.optional(v.pipe(v.string(), v.url("must be a URL"))),

  /** webpush | sandbox | off. */
  PUSH_PROVIDER: mode("webpush"),
  /** VAPID contact (mailto: or https:) and key pair (`npx web-push generate-vapid-keys`); the private key is secret. */
  VAPID_SUBJECT: v.optional(v.pipe(v.string(), v.regex(/^(mailto:|https:\/\/)/, "must be a mailto: or https: URL"))),
  /** VAPID public key (base64url), the one browsers subscribe with. */
  VAPID_PUBLIC_KEY: v.optional(
    v.pipe(v.string(), v.regex(BASE64URL, "must be base64url"), v.length(87, "must be 65 bytes of base64url")),
  ),
  /** VAPID private key (base64url). Secret, never logged. */
  VAPID_PRIVATE_KEY: v.optional(
    v.pipe(v.string(), v.regex(BASE64URL, "must be base64url"), v.length(43, "must be 32 bytes of base64url")),
  ),
  /** Push services a subscription may point at (`*.host` for subdomains); anything else is refused (SSRF). */
  PUSH_ALLOWED_HOSTS: list(DEFAULT_PUSH_HOSTS),
  /** Only for PUSH_PROVIDER=sandbox: loopback and private addresses are refused otherwise. */
  PUSH_ALLOW_PRIVATE_NETWORKS: flag(false),
  /** PEM file of an extra CA to trust: the push sandbox's self-signed one. */
  PUSH_CA_FILE: v.optional(v.pipe(v.string(), v.minLength(1))),
  /** How long push services keep an undelivered transactional push (RFC 8030 TTL). */
  PUSH_TTL_TRANSACTIONAL_SECONDS: intIn(86_400, 0, 2_419_200),
  /** How long push services keep an undelivered promotional push (RFC 8030 TTL). */
  PUSH_TTL_PROMOTIONAL_SECONDS: intIn(3600, 0, 2_419_200),
};

const Entries = v.object(channelProviderEnv);
export type ChannelProvidersConfig = v.InferOutput<typeof Entries>;

const need = (config: ChannelProvidersConfig, key: keyof ChannelProvidersConfig, when: boolean, why: string) =>
  when && config[key] === undefined ? [{ key, message: `is required ${why}` }] : [];

/** An smtp:// or smtps:// URL naming a host; checked here so that nodemailer is loaded only when used. */
const isSmtpUrl = (value: string): boolean => {
  if (!URL.canParse(value)) return false;
  const url = new URL(value);
  return (url.protocol === "smtp:" || url.protocol === "smtps:") && url.hostname !== "";
};

/** What the email failover needs: a relay, and a first provider to fail over from. */
function failoverProblems(config: ChannelProvidersConfig): Array<{ key: string; message: string }> {
  if (config.EMAIL_FAILOVER_PROVIDER === "off") return [];
  return [
    ...need(config, "SMTP_URL", true, "when EMAIL_FAILOVER_PROVIDER is not off"),
    ...(config.SMTP_URL !== undefined && !isSmtpUrl(config.SMTP_URL)
      ? [{ key: "SMTP_URL", message: "must be an smtp:// or smtps:// URL with a host" }]
      : []),
    ...(config.EMAIL_PROVIDER === "off"
      ? [{ key: "EMAIL_FAILOVER_PROVIDER", message: "needs EMAIL_PROVIDER (the provider it fails over from)" }]
      : []),
  ];
}

/** Every cross-field problem, by variable: what a mode needs and what only a sandbox may do. */
export function channelProviderProblems(config: ChannelProvidersConfig): Array<{ key: string; message: string }> {
  const email = config.EMAIL_PROVIDER !== "off";
  const sms = config.SMS_PROVIDER !== "off";
  const push = config.PUSH_PROVIDER !== "off";
  const httpsOnly = (key: keyof ChannelProvidersConfig, real: boolean) =>
    real && !String(config[key]).startsWith("https://")
      ? [{ key, message: "must be https for the real provider" }]
      : [];
  return [
    ...need(config, "SENDGRID_API_KEY", email, "when EMAIL_PROVIDER is not off"),
    ...httpsOnly("SENDGRID_BASE_URL", config.EMAIL_PROVIDER === "sendgrid"),
    ...failoverProblems(config),
    ...need(config, "PLIVO_AUTH_ID", sms, "when SMS_PROVIDER is not off"),
    ...need(config, "PLIVO_AUTH_TOKEN", sms, "when SMS_PROVIDER is not off"),
    ...need(config, "SMS_FROM", sms, "when SMS_PROVIDER is not off"),
    ...httpsOnly("PLIVO_BASE_URL", config.SMS_PROVIDER === "plivo"),
    ...need(config, "VAPID_SUBJECT", push, "when PUSH_PROVIDER is not off"),
    ...need(config, "VAPID_PUBLIC_KEY", push, "when PUSH_PROVIDER is not off"),
    ...need(config, "VAPID_PRIVATE_KEY", push, "when PUSH_PROVIDER is not off"),
    ...(config.PUSH_ALLOW_PRIVATE_NETWORKS && config.PUSH_PROVIDER !== "sandbox"
      ? [{ key: "PUSH_ALLOW_PRIVATE_NETWORKS", message: "is only allowed with PUSH_PROVIDER=sandbox (SSRF)" }]
      : []),
    ...(push && config.PUSH_ALLOWED_HOSTS.length === 0
      ? [{ key: "PUSH_ALLOWED_HOSTS", message: "must list at least one push service" }]
      : []),
  ];
}

/**
 * The cross-field checks as a valibot action, typed by the app's own (wider) config object, so
 * they are reported like any other config problem (exit 78 at start):
 * `const Env = v.object({ ...common, ...channelProviderEnv }); v.pipe(Env, checkChannelProviders<v.InferOutput<typeof Env>>())`
 */
export const checkChannelProviders = <T extends ChannelProvidersConfig>() =>
  v.rawCheck<T>(({ dataset, addIssue }) => {
    if (!dataset.typed) return;
    const input = dataset.value;
    for (const problem of channelProviderProblems(input)) {
      addIssue({
        message: problem.message,
        path: [
          {
            type: "object",
            origin: "value",
            input,
            key: problem.key,
            value: (input as Record<string, unknown>)[problem.key],
          },
        ],
      });
    }
  });

/** The channel providers on their own, for an app that has no other settings to add. */
export const ChannelProvidersConfig = v.pipe(Entries, checkChannelProviders<ChannelProvidersConfig>());

export interface ChannelProviderOptions {
  /** Deadline of one provider call. */
  timeoutMs: number;
  /** Removes a push subscription the push service reported gone (see WebPushConfig). */
  onPushSubscriptionGone?: (endpoint: string) => Promise<void>;
  /** Stores an in-app message in the user's inbox (@notify/db storeInboxItem); enables in_app. */
  inAppStore?: InAppConfig["store"];
}

const refuseProblems = (config: ChannelProvidersConfig): void => {
  const problems = channelProviderProblems(config);
  if (problems.length > 0) throw new Error(problems.map((p) => `${p.key}: ${p.message}`).join("; "));
};

/**
 * One provider per enabled channel, built once at start from a validated config (in_app when
 * given a store). Each provider's SDK is loaded only when its channel is on, so a process does
 * not hold the memory of an SDK (Plivo's and Web Push's are large) that it never calls.
 */
export async function createChannelProviders(
  config: ChannelProvidersConfig,
  options: ChannelProviderOptions,
): Promise<Partial<Record<Channel, Provider>>> {
  refuseProblems(config);
  const providers: Partial<Record<Channel, Provider>> = {};
  if (config.EMAIL_PROVIDER !== "off") {
    const { createSendgridProvider } = await import("./sendgrid/provider.js");
    providers.email = createSendgridProvider({
      apiKey: config.SENDGRID_API_KEY as string,
      baseUrl: config.SENDGRID_BASE_URL,
      from: config.EMAIL_FROM,
      fromName: config.EMAIL_FROM_NAME,
      timeoutMs: options.timeoutMs,
    });
  }
  if (config.SMS_PROVIDER !== "off") {
    const { createPlivoProvider } = await import("./plivo/provider.js");
    providers.sms = createPlivoProvider({
      authId: config.PLIVO_AUTH_ID as string,
      authToken: config.PLIVO_AUTH_TOKEN as string,
      baseUrl: config.PLIVO_BASE_URL,
      from: config.SMS_FROM as string,
      ...(config.PLIVO_REPORT_URL === undefined ? {} : { reportUrl: config.PLIVO_REPORT_URL }),
      timeoutMs: options.timeoutMs,
    });
  }
  if (config.PUSH_PROVIDER !== "off") {
    const { createWebPushProvider } = await import("./webpush/provider.js");
    providers.push = createWebPushProvider({
      vapid: {
        subject: config.VAPID_SUBJECT as string,
        publicKey: config.VAPID_PUBLIC_KEY as string,
        privateKey: config.VAPID_PRIVATE_KEY as string,
      },
      allowedHosts: config.PUSH_ALLOWED_HOSTS,
      allowPrivateNetworks: config.PUSH_ALLOW_PRIVATE_NETWORKS,
      ...(config.PUSH_CA_FILE === undefined ? {} : { ca: readFileSync(config.PUSH_CA_FILE, "utf8") }),
      ttlSeconds: {
        transactional: config.PUSH_TTL_TRANSACTIONAL_SECONDS,
        promotional: config.PUSH_TTL_PROMOTIONAL_SECONDS,
      },
      timeoutMs: options.timeoutMs,
      ...(options.onPushSubscriptionGone === undefined ? {} : { onSubscriptionGone: options.onPushSubscriptionGone }),
    });
  }
  if (options.inAppStore !== undefined) {
    const { createInAppProvider } = await import("./inapp/provider.js");
    providers.in_app = createInAppProvider({ store: options.inAppStore });
  }
  return providers;
}

/**
 * The provider email fails over to when EMAIL_PROVIDER cannot take a send; undefined when
 * EMAIL_FAILOVER_PROVIDER is off. Its pooled connections stay open until its close(). The
 * real relay must upgrade to TLS (STARTTLS) before the credentials go; the sandbox need not.
 * nodemailer is loaded only here, when the failover is on.
 */
export async function createEmailFailoverProvider(
  config: ChannelProvidersConfig,
  options: ChannelProviderOptions,
): Promise<Provider | undefined> {
  refuseProblems(config);
  if (config.EMAIL_FAILOVER_PROVIDER === "off") return undefined;
  const { createSmtpProvider } = await import("./smtp/provider.js");
  return createSmtpProvider({
    url: config.SMTP_URL as string,
    from: config.EMAIL_FROM,
    fromName: config.EMAIL_FROM_NAME,
    timeoutMs: options.timeoutMs,
    requireTls: config.EMAIL_FAILOVER_PROVIDER === "smtp",
    ...(config.SMTP_CA_FILE === undefined ? {} : { ca: readFileSync(config.SMTP_CA_FILE, "utf8") }),
  });
}
