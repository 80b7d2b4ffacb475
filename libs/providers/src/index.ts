export type * from "./provider.js";
export type { MailAddress, MailContent, SendgridErrorDetail } from "./sendgrid/mail-send.js";
export * from "./sendgrid/provider.js";
export * from "./sendgrid/sandbox.js";
