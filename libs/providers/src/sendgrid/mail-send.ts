/**
 * The subset of SendGrid's v3 Mail Send body the sandbox understands, validated the way
 * SendGrid does: every problem is reported at once, with SendGrid's own messages and fields,
 * so clients meet the same 400s here as in production. Unknown fields are accepted and ignored.
 */

/** One entry of SendGrid's `{"errors": [...]}` body. */
export interface SendgridErrorDetail {
  message: string;
  field: string | null;
  help: string | null;
}

export interface MailAddress {
  email: string;
  name?: string;
}

export interface MailContent {
  type: string;
  value: string;
}

export interface Personalization {
  to: MailAddress[];
  subject?: string;
  custom_args: Record<string, string>;
  headers: Record<string, string>;
}

export interface MailSend {
  personalizations: Personalization[];
  from: MailAddress;
  subject?: string;
  content: MailContent[];
  custom_args: Record<string, string>;
  categories: string[];
  headers: Record<string, string>;
}

export type MailSendParse = { ok: true; mail: MailSend } | { ok: false; errors: SendgridErrorDetail[] };

const HELP = "http://sendgrid.com/docs/API_Reference/Web_API_v3/Mail/errors.html";

const MESSAGES = {
  badRequest: "Bad Request",
  personalizations: "The personalizations field is required and must have at least one personalization.",
  to: "The to array is required for all personalization objects, and must have at least one email object with a valid email address.",
  toEmail:
    'Each to object must at least have an email address and may also contain a name. e.g. {"email": "example@example.com"} or {"email": "example@example.com", "name": "Example Recipient"}',
  invalidAddress: "Does not contain a valid address.",
  from: 'The from object must be provided for every email send. It is an object that requires the email parameter, but may also contain a name parameter.  e.g. {"email" : "example@example.com"}  or {"email" : "example@example.com", "name" : "Example Recipient"}.',
  invalidFrom: "The from email does not contain a valid address.",
  subject:
    "The subject is required. You can get around this requirement if you use a template with a subject defined or if every personalization has a subject defined.",
  content:
    "Unless a valid template_id is provided, the content parameter is required. There must be at least one defined content block. We typically suggest both text/plain and text/html blocks are included, but only one block is required.",
  contentType: "The content type must be a string at least one character in length.",
  contentValue: "The content value must be a string at least one character in length.",
  expectedString: "Invalid type. Expected: string.",
  expectedObject: "Invalid type. Expected: object.",
  expectedArray: "Invalid type. Expected: array.",
} as const;

// Deliberately loose (one @, a dot in the domain, no spaces or brackets): SendGrid rejects
// obviously malformed addresses at the API and leaves the rest to the receiving server.
const EMAIL = /^[^\s@<>()[\]",;:]+@[^\s@<>()[\]",;:]+\.[^\s@<>()[\]",;:.]+$/;

type Json = Record<string, unknown>;
const isRecord = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const isNonEmptyString = (value: unknown): value is string => typeof value === "string" && value.length > 0;

export function parseMailSend(body: unknown): MailSendParse {
  if (!isRecord(body)) return { ok: false, errors: [{ message: MESSAGES.badRequest, field: null, help: null }] };
  const errors: SendgridErrorDetail[] = [];
  const fail = (message: string, field: string): undefined => {
    // SendGrid's help anchors name the field without array indexes or the trailing ".email".
    const anchor = field.replace(/\.\d+/g, "").replace(/\.email$/, "");
    errors.push({ message, field, help: `${HELP}#message.${anchor}` });
  };

  const address = (value: unknown, field: string, missing: string, invalid: string): MailAddress | undefined => {
    if (!isRecord(value) || value.email === undefined) return fail(missing, `${field}.email`);
    if (typeof value.email !== "string" || !EMAIL.test(value.email)) return fail(invalid, `${field}.email`);
    if (value.name !== undefined && typeof value.name !== "string")
      return fail(MESSAGES.expectedString, `${field}.name`);
    return value.name === undefined ? { email: value.email } : { email: value.email, name: value.name };
  };

  const optionalString = (value: unknown, field: string): string | undefined => {
    if (value === undefined || typeof value === "string") return value;
    return fail(MESSAGES.expectedString, field);
  };

  const stringMap = (value: unknown, field: string): Record<string, string> => {
    if (value === undefined) return {};
    const map: Record<string, string> = {};
    if (!isRecord(value)) return fail(MESSAGES.expectedObject, field) ?? map;
    for (const [key, item] of Object.entries(value)) {
      if (typeof item === "string") map[key] = item;
      else fail(MESSAGES.expectedString, `${field}.${key}`);
    }
    return map;
  };

  const personalizations: Personalization[] = [];
  if (!Array.isArray(body.personalizations) || body.personalizations.length === 0) {
    fail(MESSAGES.personalizations, "personalizations");
  } else {
    for (const [i, item] of (body.personalizations as unknown[]).entries()) {
      const field = `personalizations.${i}`;
      const p = isRecord(item) ? item : {};
      if (!Array.isArray(p.to) || p.to.length === 0) {
        fail(MESSAGES.to, `${field}.to`);
        continue;
      }
      const to = p.to.map((r: unknown, j) => address(r, `${field}.to.${j}`, MESSAGES.toEmail, MESSAGES.invalidAddress));
      const subject = optionalString(p.subject, `${field}.subject`);
      personalizations.push({
        to: to.filter((a) => a !== undefined),
        ...(subject === undefined ? {} : { subject }),
        custom_args: stringMap(p.custom_args, `${field}.custom_args`),
        headers: stringMap(p.headers, `${field}.headers`),
      });
    }
  }

  const from = address(body.from, "from", MESSAGES.from, MESSAGES.invalidFrom);
  const subject = optionalString(body.subject, "subject");
  const everyPersonalizationHasSubject =
    personalizations.length > 0 && personalizations.every((p) => isNonEmptyString(p.subject));
  if (!isNonEmptyString(subject) && !everyPersonalizationHasSubject) fail(MESSAGES.subject, "subject");

  const content: MailContent[] = [];
  if (!Array.isArray(body.content) || body.content.length === 0) {
    fail(MESSAGES.content, "content");
  } else {
    for (const [i, item] of (body.content as unknown[]).entries()) {
      const block = isRecord(item) ? item : {};
      const type = isNonEmptyString(block.type) ? block.type : fail(MESSAGES.contentType, `content.${i}.type`);
      const value = isNonEmptyString(block.value) ? block.value : fail(MESSAGES.contentValue, `content.${i}.value`);
      if (type !== undefined && value !== undefined) content.push({ type, value });
    }
  }

  let categories: string[] = [];
  if (body.categories !== undefined) {
    if (Array.isArray(body.categories) && body.categories.every((c) => typeof c === "string")) {
      categories = body.categories;
    } else {
      fail(MESSAGES.expectedArray, "categories");
    }
  }
  const custom_args = stringMap(body.custom_args, "custom_args");
  const headers = stringMap(body.headers, "headers");

  if (errors.length > 0 || from === undefined) return { ok: false, errors };
  return {
    ok: true,
    mail: {
      personalizations,
      from,
      ...(subject === undefined ? {} : { subject }),
      content,
      custom_args,
      categories,
      headers,
    },
  };
}
