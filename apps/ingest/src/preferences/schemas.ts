import {
  AppError,
  CATEGORY_PATTERN,
  CHANNELS,
  canonicalLocale,
  isTimeZone,
  pushEndpointProblem,
  sortChannels,
  webPushKeyProblems,
} from "@notify/core";
import * as v from "valibot";

/** Most push subscriptions one user keeps: one per browser or device they use. */
export const MAX_DEVICE_TOKENS = 20;
export const MAX_CATEGORY_OPTOUTS = 200;
/** Ceiling of rate_cap_per_day; the column is a 32-bit integer. */
export const MAX_RATE_CAP = 1_000_000;

/** The same rule as a notification's user_id. */
export const UserId = v.pipe(
  v.string("user_id must be a string"),
  v.minLength(1, "user_id must not be empty"),
  v.maxLength(256, "user_id must be at most 256 characters"),
  v.regex(/^[\x21-\x7e]+$/, "user_id must be printable ASCII without spaces"),
);

/** The {id} of /users/{id}/...: a 400 naming the path parameter when it is not a user id. */
export function parseUserIdParam(value: string): string {
  const result = v.safeParse(UserId, value);
  if (result.success) return result.output;
  const message = result.issues[0]?.message ?? "invalid user id";
  throw new AppError("validation_failed", `path: ${message}`, { fields: [{ field: "user_id", message }] });
}

/** A body may repeat the user id of its path, so a GET answer can be sent back as is. */
export function checkBodyUserId(pathId: string, bodyId: string | undefined): void {
  if (bodyId === undefined || bodyId === pathId) return;
  throw new AppError("validation_failed", "user_id in the body differs from the path", {
    fields: [{ field: "user_id", message: `must be "${pathId}" (the path's user id) or absent` }],
  });
}

const clock = (field: string) =>
  v.pipe(
    v.string(`${field} must be a string`),
    v.regex(/^([01]\d|2[0-3]):[0-5]\d$/, `${field} must be "HH:MM", 24-hour (00:00-23:59)`),
  );

/** A quiet window in the user's time zone; start after end crosses midnight. */
export const QuietHours = v.pipe(
  v.strictObject({
    start: clock("quiet_hours.start"),
    end: clock("quiet_hours.end"),
    tz: v.pipe(
      v.string("quiet_hours.tz must be a string"),
      v.check(isTimeZone, "quiet_hours.tz must be an IANA time zone, e.g. Europe/London"),
    ),
  }),
  v.forward(
    v.check((q) => q.start !== q.end, "quiet_hours.end must differ from start (the window would be empty or all day)"),
    ["end"],
  ),
);
export type QuietHours = v.InferOutput<typeof QuietHours>;

/**
 * A Web Push subscription, as PushSubscription.toJSON() gives it in the browser. Its endpoint
 * is https on a public host; `allowPrivateHosts` (the development profile) also takes loopback
 * and private hosts, where the local push sandbox listens.
 */
export const webPushSubscription = (allowPrivateHosts = false) =>
  v.strictObject({
    endpoint: v.pipe(
      v.string("endpoint must be a string"),
      v.maxLength(2048, "endpoint must be at most 2048 characters"),
      v.check(
        (endpoint) => pushEndpointProblem(endpoint, { allowPrivateHosts }) === null,
        (issue) => pushEndpointProblem(String(issue.input), { allowPrivateHosts }) ?? "invalid endpoint",
      ),
    ),
    expirationTime: v.optional(
      v.nullable(
        v.pipe(v.number("expirationTime must be a number"), v.safeInteger("expirationTime must be epoch milliseconds")),
      ),
    ),
    keys: v.pipe(
      v.strictObject({
        p256dh: v.pipe(v.string("keys.p256dh must be a string"), v.maxLength(200)),
        auth: v.pipe(v.string("keys.auth must be a string"), v.maxLength(100)),
      }),
      v.check(
        (keys) => webPushKeyProblems(keys).length === 0,
        (issue) => webPushKeyProblems(issue.input as { p256dh: string; auth: string }).join("; "),
      ),
    ),
  });
export const WebPushSubscription = webPushSubscription();
export type WebPushSubscription = v.InferOutput<typeof WebPushSubscription>;

/** A BCP 47 language tag, stored in canonical case ("en-gb" becomes "en-GB"). */
export const Locale = v.pipe(
  v.string("locale must be a string"),
  v.check((tag) => canonicalLocale(tag) !== null, "must be a BCP 47 language tag, e.g. en-GB"),
  v.transform((tag) => canonicalLocale(tag) as string),
);

/** An IANA time zone name this runtime knows (`Europe/London`); offsets like `+05:00` are not zones. */
export const TimeZone = v.pipe(
  v.string("time_zone must be a string"),
  v.check(isTimeZone, "time_zone must be an IANA time zone, e.g. Europe/London"),
);

/** Channels the user refuses: each once, in the canonical order. */
export const ChannelOptout = v.pipe(
  v.array(
    v.picklist(CHANNELS, `channel_optout may only contain ${CHANNELS.join(", ")}`),
    "channel_optout must be an array",
  ),
  v.maxLength(16, "channel_optout has too many entries"),
  v.transform((channels) => sortChannels(channels)),
);

/** Categories the user refuses (critical categories are sent regardless): each once, sorted. */
export const CategoryOptout = v.pipe(
  v.array(
    v.pipe(
      v.string("category_optout entries must be strings"),
      v.regex(CATEGORY_PATTERN, "category_optout entries must be 1-64 of a-z, 0-9, '_', '.', '-'"),
    ),
    "category_optout must be an array",
  ),
  v.maxLength(MAX_CATEGORY_OPTOUTS, `category_optout may hold at most ${MAX_CATEGORY_OPTOUTS} categories`),
  v.transform((categories) => [...new Set(categories)].sort()),
);

/**
 * Body of PUT /api/v1/users/{id}/preferences. PUT replaces the whole document: an absent field
 * takes its default. Sets (opt-outs, subscriptions by endpoint) are stored without repeats.
 */
const preferencesRequest = (allowPrivateHosts: boolean) =>
  v.strictObject({
    user_id: v.optional(UserId),
    /** Channels the user refuses. */
    channel_optout: v.optional(ChannelOptout, []),
    /** Categories the user refuses (critical categories are sent regardless). */
    category_optout: v.optional(CategoryOptout, []),
    /** Quiet window; null for none. */
    quiet_hours: v.optional(v.nullable(QuietHours), null),
    /** Promotional notifications per day in the user's time zone; null for no cap. */
    rate_cap_per_day: v.optional(
      v.nullable(
        v.pipe(
          v.number("rate_cap_per_day must be a number"),
          v.integer("rate_cap_per_day must be an integer"),
          v.minValue(0, "rate_cap_per_day must not be negative"),
          v.maxValue(MAX_RATE_CAP, `rate_cap_per_day must be at most ${MAX_RATE_CAP}`),
        ),
      ),
      null,
    ),
    /** Web Push subscriptions of the user's browsers and devices. */
    device_tokens: v.optional(
      v.pipe(
        v.array(webPushSubscription(allowPrivateHosts), "device_tokens must be an array"),
        v.maxLength(MAX_DEVICE_TOKENS, `device_tokens may hold at most ${MAX_DEVICE_TOKENS} subscriptions`),
        v.checkItems(
          (item, index, array) => array.findIndex((other) => other.endpoint === item.endpoint) === index,
          "device_tokens must not repeat an endpoint",
        ),
      ),
      [],
    ),
    /** Locale for rendering templates; null uses each template's default. */
    locale: v.optional(v.nullable(Locale), null),
    /** Where a notification's send_at_local is read; null uses the quiet hours' zone, else UTC. */
    time_zone: v.optional(v.nullable(TimeZone), null),
  });
export const PreferencesRequest = preferencesRequest(false);
/** The same, in the development profile: push endpoints may be on loopback and private hosts. */
export const DevelopmentPreferencesRequest = preferencesRequest(true);
export type PreferencesRequest = v.InferOutput<typeof PreferencesRequest>;

/** Body of both preference answers: the stored document, or the defaults. */
export const PreferencesResponse = v.strictObject({
  user_id: UserId,
  channel_optout: v.array(v.picklist(CHANNELS)),
  category_optout: v.array(v.string()),
  quiet_hours: v.nullable(QuietHours),
  rate_cap_per_day: v.nullable(v.number()),
  device_tokens: v.array(WebPushSubscription),
  locale: v.nullable(v.string()),
  time_zone: v.nullable(v.string()),
});
export type PreferencesResponse = v.InferOutput<typeof PreferencesResponse>;

/** E.164: "+", country code, subscriber number; 8 to 15 digits in all. */
const E164 = /^\+[1-9]\d{6,14}$/;

/** Body of PUT /api/v1/users/{id}/contacts: where email and SMS reach the user. PUT replaces. */
export const ContactsRequest = v.strictObject({
  user_id: v.optional(UserId),
  /** Email address; null for none. */
  email: v.optional(
    v.nullable(
      v.pipe(
        v.string("email must be a string"),
        v.maxLength(254, "email must be at most 254 characters"),
        v.email("email must be an email address"),
      ),
    ),
    null,
  ),
  /** Phone number for SMS in E.164 form; null for none. */
  phone: v.optional(
    v.nullable(v.pipe(v.string("phone must be a string"), v.regex(E164, "phone must be E.164, e.g. +14155550123"))),
    null,
  ),
});
export type ContactsRequest = v.InferOutput<typeof ContactsRequest>;

/** Body of both contact answers. */
export const ContactsResponse = v.strictObject({
  user_id: UserId,
  email: v.nullable(v.string()),
  phone: v.nullable(v.string()),
});
export type ContactsResponse = v.InferOutput<typeof ContactsResponse>;
