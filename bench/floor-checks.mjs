// What every request, lane message and send must pass besides the durable work, for the floors
// that measure it (FLOOR_CHECKS=1): done with the project's own functions and nothing around
// them (no middleware, caches, breakers, retries, logging or metrics), so the gap between a
// floor with the checks and the app is the app's own plumbing.
import { randomUUID } from "node:crypto";
import {
  decideRouting,
  hashKey,
  LaneMessage,
  leak,
  NotificationRequest,
  SENDABLE,
  schemaProblem,
  splitRate,
  templateEngineOptions,
  validate,
  WorkItem,
} from "@notify/core";
import { loadChannel, readProfileRow } from "@notify/db";
import { SAMPLE_TEMPLATE } from "@notify/devstack";

import { parseIdempotencyKey, prepareNotification } from "@notify/ingest/bench";
import { createRateLimiter } from "@notify/workers/bench";
import { Eta } from "eta";

/** The template every bench sends: the sample `npm start` seeds, its email variant. */
const WELCOME_EMAIL = SAMPLE_TEMPLATE.variants.find((variant) => variant.channel === "email");

/**
 * A request's checks: the API key hashed and found, its leaky bucket, the Idempotency-Key
 * parsed, the body validated, and ingest's own preparation (the template's parameters and
 * deadline, the canonical request hash, the lane message and its partition), then the answer's
 * headers (request id, Location, RateLimit). `check(c)` answers a refusal (a Response) or
 * `{ key, hash, message, answer(c) }`, `message` the lane message with its `created_at`;
 * `answer(c)` sets the headers and answers 202.
 */
export function requestChecks(apiKey, bus) {
  // The one key and template the load generator uses, as ingest's caches hold them when warm.
  const keys = new Map([[hashKey(apiKey), { keyId: "k", clientId: "bench" }]]);
  const templates = new Map([
    [SAMPLE_TEMPLATE.id, { id: SAMPLE_TEMPLATE.id, version: 1, params: SAMPLE_TEMPLATE.params }],
  ]);
  const deps = { bus, templates: (id) => templates.get(id) ?? null };
  const limits = { perSecond: 1_000_000, burst: 1_000_000 };
  const buckets = new Map();
  return async (c) => {
    const presented = /^Bearer\s+(\S+)\s*$/i.exec(c.req.header("authorization") ?? "")?.[1] ?? "";
    const principal = keys.get(hashKey(presented));
    if (!principal) return c.json({ title: "unauthorized" }, 401);
    const { decision, drainedAt } = leak(buckets.get(principal.keyId) ?? 0, Date.now(), limits);
    buckets.set(principal.keyId, drainedAt);
    const key = parseIdempotencyKey(c.req.header("idempotency-key"));
    const request = validate(NotificationRequest, await c.req.json());
    const prepared = await prepareNotification(deps, { clientId: principal.clientId, idempotencyKey: key, request });
    const { message } = prepared;
    const id = message.notification_id;
    return {
      key,
      hash: prepared.requestHash,
      message: { ...message, created_at: new Date().toISOString() },
      answer(c) {
        c.header("x-request-id", randomUUID());
        c.header("ratelimit-policy", `"default";q=${limits.burst};w=1`);
        c.header("ratelimit", `"default";r=${decision.remaining};t=${decision.resetSeconds}`);
        c.header("location", `/api/v1/notifications/${id}`);
        return c.json({ notification_id: id, status: "accepted" }, 202);
      },
    };
  };
}

/**
 * A lane message's checks: the message validated, the user's contacts and preferences read
 * (the processor's profile query, every time: no cache), the preference policy decided, and the
 * email variant rendered with the processor's template engine (compiled once). `route(message)`
 * answers the email's `{ to, subject, body }`, or null when the policy does not send it.
 */
export function routeChecks(database) {
  const html = new Eta(templateEngineOptions(true));
  const plain = new Eta(templateEngineOptions(false));
  const compiled = { subject: plain.compile(WELCOME_EMAIL.subject), body: html.compile(WELCOME_EMAIL.body) };
  const render = (engine, fn, data) => fn.call(engine, data);
  return async (message) => {
    const problem = schemaProblem(LaneMessage, message);
    if (problem) throw new Error(`not a lane message: ${problem}`);
    const profile = await readProfileRow(database, message.user_id);
    const decisions = decideRouting({
      requested: message.channels,
      category: message.category,
      priority: message.priority,
      critical: false,
      preferences: {
        channelOptout: profile.channel_optout ?? [],
        categoryOptout: profile.category_optout ?? [],
        quietHours: profile.quiet_hours ?? null,
        rateCapPerDay: profile.rate_cap_per_day ?? null,
      },
      reach: { email: profile.email, phone: profile.phone, pushSubscriptions: profile.device_tokens?.length ?? 0 },
      now: new Date(),
      quietHoursAction: "defer",
    });
    if (!decisions.some((d) => d.channel === "email" && d.action === "route")) return null;
    return {
      to: profile.email,
      subject: render(plain, compiled.subject, message.data),
      body: render(html, compiled.body, message.data),
    };
  };
}

/**
 * A send's checks: the work item validated, the channel's row read (a settled or cancelled
 * channel is not sent), and a token taken from the provider's bucket shared by every worker
 * (the worker's own limiter over notify_rate, at `rate` a second). `admit(item)` answers whether
 * to send; the text/plain alternative is emailDelivery's `text` (floor-lib.mjs).
 */
export async function sendChecks({ sql, bus, rate = 1_000_000 }) {
  const limiter = createRateLimiter({
    kv: await bus.kv("notify_rate"),
    key: "sendgrid",
    rates: splitRate({ perSecond: rate, burst: rate }, 20),
  });
  return async (item) => {
    const problem = schemaProblem(WorkItem, item);
    if (problem) throw new Error(`not a work item: ${problem}`);
    const row = await loadChannel(sql, item);
    if (!row || !SENDABLE.includes(row.status)) return false;
    await limiter.acquire(item.priority, 1);
    return true;
  };
}
