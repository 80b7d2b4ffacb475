export {
  ChannelProvidersConfig,
  channelProviderEnv,
  checkChannelProviders,
  createChannelProviders,
  createEmailFailoverProvider,
} from "./config.js";
export { htmlToText } from "./email-text.js";
export { createInAppProvider } from "./inapp/provider.js";
export { createPlivoProvider, type PlivoConfig } from "./plivo/provider.js";
export { formParams, plivoSignatureV2, plivoSignatureV3, verifyPlivoSignature } from "./plivo/signature.js";
export type { OutboundMessage, Provider } from "./provider.js";
export {
  SENDGRID_SIGNATURE_HEADER,
  SENDGRID_TIMESTAMP_HEADER,
  sendgridPublicKey,
  signSendgridEvents,
  verifySendgridSignature,
} from "./sendgrid/event-webhook.js";
export { SendgridHttpClient } from "./sendgrid/http-client.js";
export { type MailAddress, type MailContent, parseMailSend, type SendgridErrorDetail } from "./sendgrid/mail-send.js";
export { createSendgridProvider, type SendgridConfig } from "./sendgrid/provider.js";
export { createSmtpProvider } from "./smtp/provider.js";
export {
  createWebPushProvider,
  generateVapidKeys,
  type PushSubscription,
  pushTopic,
  type WebPushConfig,
} from "./webpush/provider.js";
export { endpointRefusal, guardedLookup, hostAllowed } from "./webpush/ssrf.js";
