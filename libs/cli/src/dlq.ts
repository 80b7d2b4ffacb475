import { DeliverPolicy } from "@nats-io/jetstream";
import { type Bus, type KV, subjectName } from "@notify/bus";
import {
  CHANNELS,
  type Channel,
  type ChannelStatus,
  DEAD_LETTER_CLASSES,
  type DeadLetter,
  decideRouting,
  type GuardValue,
  guardKey,
  isChannel,
  isTimeZone,
  parseClock,
  type QuietHours,
  type WorkItem,
} from "@notify/core";
import type { Database, DeviceToken } from "@notify/db";
import { type CliDeps, type Command, type CommandGroup, type Io, parseOptions, UsageError } from "./command.js";
import { table } from "./table.js";

/** The status reason of a channel a replay has reset: a replay interrupted before its publish is resumed. */
export const REPLAY_REASON = "replay";

const FILTERS = {
  channel: { type: "string" },
  reason: { type: "string" },
  since: { type: "string" },
  until: { type: "string" },
  notification: { type: "string" },
} as const;

interface Filters {
  channel?: Channel;
  reason?: string;
  since?: Date;
  until?: Date;
  notification?: string;
}

/** A dead letter as stored: its stream sequence and time, and the message. */
export interface StoredLetter {
  seq: number;
  time: Date;
  letter: DeadLetter;
}

const UNITS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** `--since 24h` (that long ago) or an RFC 3339 time. */
export function parseTime(text: string, option: string, now = Date.now()): Date {
  const relative = /^(\d+)([smhd])$/.exec(text);
  if (relative) return new Date(now - Number(relative[1]) * UNITS[relative[2] as keyof typeof UNITS]);
  const absolute = Date.parse(text);
  if (!/^\d{4}-\d\d-\d\d/.test(text) || Number.isNaN(absolute)) {
    throw new UsageError(`${option} must be a duration such as 30m, 24h, 7d or an RFC 3339 time, got "${text}"`);
  }
  return new Date(absolute);
}

function parseFilters(values: { [K in keyof typeof FILTERS]?: string }): Filters {
  const filters: Filters = {};
  if (values.channel !== undefined) {
    if (!isChannel(values.channel)) throw new UsageError(`--channel must be one of ${CHANNELS.join(", ")}`);
    filters.channel = values.channel;
  }
  if (values.reason !== undefined) filters.reason = values.reason;
  if (values.since !== undefined) filters.since = parseTime(values.since, "--since");
  if (values.until !== undefined) filters.until = parseTime(values.until, "--until");
  if (values.notification !== undefined) filters.notification = values.notification;
  return filters;
}

/** A reason filter matches a class exactly, or any part of the reason text (case-insensitive). */
const reasonMatches = (letter: DeadLetter, reason: string) =>
  letter.class === reason || letter.reason.toLowerCase().includes(reason.toLowerCase());

async function connect(deps: CliDeps): Promise<Bus> {
  if (!deps.bus) throw new Error("this command needs NATS (NATS_URL)");
  return deps.bus();
}

/**
 * Reads the dead-letter stream with an ordered consumer (ephemeral: it changes nothing on the
 * server), from `since` on and for one channel's subject when asked; the other filters apply
 * here. Oldest first.
 */
export async function readDeadLetters(bus: Bus, filters: Filters): Promise<StoredLetter[]> {
  const subject = filters.channel ? bus.subjects.dlq(filters.channel) : subjectName(bus.naming, "notify.dlq.*");
  const consumer = await bus.js.consumers.get(bus.streams.dlq, {
    filter_subjects: subject,
    ...(filters.since
      ? { deliver_policy: DeliverPolicy.StartTime, opt_start_time: filters.since.toISOString() }
      : { deliver_policy: DeliverPolicy.All }),
  });
  const letters: StoredLetter[] = [];
  let left = (await consumer.info()).num_pending;
  while (left > 0) {
    const batch = await consumer.fetch({ max_messages: Math.min(left, 256), expires: 2000 });
    let got = 0;
    for await (const msg of batch) {
      got++;
      left = msg.info.pending;
      const time = new Date(Math.floor(msg.info.timestampNanos / 1e6));
      const letter = msg.json<DeadLetter>();
      if (filters.until && time > filters.until) continue;
      if (filters.reason !== undefined && !reasonMatches(letter, filters.reason)) continue;
      if (filters.notification !== undefined && letter.item.notification_id !== filters.notification) continue;
      letters.push({ seq: msg.seq, time, letter });
    }
    if (got === 0) break;
  }
  return letters;
}

interface ChannelState {
  notification_id: string;
  channel: Channel;
  status: ChannelStatus;
  reason: string | null;
  attempts: number;
}

async function channelStates(database: Database, letters: StoredLetter[]): Promise<Map<string, ChannelState>> {
  if (letters.length === 0) return new Map();
  const rows = await database.sql<ChannelState[]>`
    select notification_id, channel, status, reason, attempts from notification_channels
    where (notification_id, channel) in (
      select * from unnest(${letters.map((l) => l.letter.item.notification_id)}::text[], ${letters.map((l) => l.letter.channel)}::text[]))`;
  return new Map(rows.map((row) => [guardKey(row.notification_id, row.channel), row]));
}

const time = (date: Date | string) => new Date(date).toISOString().replace(/\.\d+Z$/, "Z");
const clip = (text: string, max = 60) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);
const printJson = (io: Io, document: unknown) => io.stdout.write(`${JSON.stringify(document, null, 2)}\n`);

const list: Command = async (argv, io, deps) => {
  const { values } = parseOptions(argv, { ...FILTERS, json: { type: "boolean" } }, []);
  const bus = await connect(deps);
  const letters = await readDeadLetters(bus, parseFilters(values));
  const states = await channelStates(deps.database, letters);
  const now = (l: StoredLetter) =>
    states.get(guardKey(l.letter.item.notification_id, l.letter.channel))?.status ?? "gone";
  if (values.json) {
    printJson(io, {
      data: letters.map((l) => ({
        seq: l.seq,
        dead_lettered_at: time(l.time),
        channel: l.letter.channel,
        lane: l.letter.lane,
        class: l.letter.class,
        reason: l.letter.reason,
        attempts: l.letter.attempts,
        notification_id: l.letter.item.notification_id,
        status_now: now(l),
      })),
    });
    return;
  }
  if (letters.length === 0) {
    io.stdout.write("no dead letters match\n");
    return;
  }
  const header = ["SEQ", "DEAD-LETTERED", "CHANNEL", "LANE", "CLASS", "ATTEMPTS", "NOTIFICATION", "NOW", "REASON"];
  const rows = letters.map((l) => [
    String(l.seq),
    time(l.time),
    l.letter.channel,
    l.letter.lane,
    l.letter.class,
    String(l.letter.attempts),
    l.letter.item.notification_id,
    now(l),
    clip(l.letter.reason),
  ]);
  io.stdout.write(table([header, ...rows]));
};

const show: Command = async (argv, io, deps) => {
  const { values, positionals } = parseOptions(argv, { json: { type: "boolean" } }, ["SEQ"]);
  const seq = Number(positionals[0]);
  if (!Number.isSafeInteger(seq) || seq < 1) throw new UsageError("SEQ must be a dead letter's stream sequence");
  const bus = await connect(deps);
  const message = await bus.jsm.streams.getMessage(bus.streams.dlq, { seq }).catch(() => null);
  if (!message) throw new Error(`no dead letter with sequence ${seq}`);
  const letter = message.json<DeadLetter>();
  const { notification_id } = letter.item;
  const [state] = [...(await channelStates(deps.database, [{ seq, time: message.time, letter }])).values()];
  const events = await deps.database.sql<{ status: string; reason: string | null; attempt: number; at: Date }[]>`
    select status, reason, attempt, at from channel_status_events
    where notification_id = ${notification_id} and channel = ${letter.channel} order by id`;
  if (values.json) {
    printJson(io, {
      seq,
      dead_lettered_at: time(message.time),
      letter,
      status_now: state ?? null,
      status_history: events,
    });
    return;
  }
  const n = letter.notification;
  io.stdout.write(
    table([
      ["seq", String(seq)],
      ["dead-lettered", time(message.time)],
      ["class", letter.class],
      ["reason", letter.reason],
      ["notification", notification_id],
      ["channel", `${letter.channel} (${letter.lane} lane, provider ${letter.provider})`],
      ["attempts", String(letter.attempts)],
      ["status now", state ? `${state.status}${state.reason ? ` (${state.reason})` : ""}` : "notification gone"],
      ["user", letter.item.user_id],
      ["to", letter.item.to],
      ["category", letter.item.category],
      ["template", n ? `${n.template_id} v${n.template_version ?? "?"}` : "?"],
      ["client", n?.client_id ?? "?"],
      ["created", n ? time(n.created_at) : "?"],
      ["subject", letter.item.subject ?? ""],
    ]),
  );
  io.stdout.write(`\nRequest data:\n${JSON.stringify(n?.data ?? null, null, 2)}\n`);
  io.stdout.write(`\nRendered body:\n${letter.item.body}\n`);
  io.stdout.write("\nAttempts:\n");
  io.stdout.write(
    letter.history.length === 0
      ? "  none recorded\n"
      : table([
          ["ATTEMPT", "AT", "OUTCOME", "PROVIDER ID", "ERROR"],
          ...letter.history.map((a) => [String(a.attempt), time(a.at), a.outcome, a.provider_id ?? "", a.error ?? ""]),
        ]),
  );
  io.stdout.write("\nStatus history:\n");
  io.stdout.write(
    events.length === 0
      ? "  none recorded\n"
      : table([
          ["AT", "STATUS", "ATTEMPT", "REASON"],
          ...events.map((e) => [time(e.at), e.status, String(e.attempt), e.reason ?? ""]),
        ]),
  );
};

interface Profile {
  email: string | null;
  phone: string | null;
  channel_optout: string[] | null;
  category_optout: string[] | null;
  quiet_hours: QuietHours | null;
  device_tokens: DeviceToken[] | null;
}

async function loadProfile(database: Database, userId: string): Promise<Profile | undefined> {
  const [row] = await database.sql<Profile[]>`
    select c.email, c.phone, p.channel_optout, p.category_optout, p.quiet_hours, p.device_tokens
    from (select ${userId}::text as user_id) u
    left join user_contacts c on c.user_id = u.user_id
    left join user_preferences p on p.user_id = u.user_id`;
  return row;
}

/** Where the channel reaches the user today: a fixed address may be exactly what the replay is for. */
function addressOf(channel: Channel, userId: string, profile: Profile | undefined): string | null {
  if (channel === "email") return profile?.email ?? null;
  if (channel === "sms") return profile?.phone ?? null;
  if (channel === "push") {
    const tokens = profile?.device_tokens ?? [];
    return tokens.length > 0 ? JSON.stringify(tokens) : null;
  }
  return userId;
}

export type ReplayPlan =
  | { action: "replay"; item: WorkItem; address_changed: boolean }
  | { action: "skip"; why: string };

/**
 * Whether a dead letter may be sent again, and as what: never when the channel has been
 * delivered (or the provider accepted it), only with `includeUnsettled` when the provider may
 * have accepted it, and only if the user's preferences today still allow it, to the user's
 * current address.
 */
export async function planReplay(
  deps: { database: Database; guard: KV; criticalCategories: readonly string[]; now: Date },
  letter: DeadLetter,
  state: ChannelState | undefined,
  includeUnsettled: boolean,
): Promise<ReplayPlan> {
  if (!state) return { action: "skip", why: "the notification no longer exists" };
  const resumable = state.status === "pending" && state.reason === REPLAY_REASON;
  if (state.status === "unsettled" && !includeUnsettled) {
    return { action: "skip", why: "unsettled: the provider may have accepted it (--include-unsettled resends anyway)" };
  }
  if (state.status !== "failed" && state.status !== "unsettled" && !resumable) {
    return { action: "skip", why: `channel is ${state.status}` };
  }
  const guard = (await deps.guard.get(guardKey(letter.item.notification_id, letter.channel)))?.json<GuardValue>();
  if (guard?.state === "sent") return { action: "skip", why: "the provider accepted it (send guard: sent)" };

  const profile = await loadProfile(deps.database, letter.item.user_id);
  const to = addressOf(letter.channel, letter.item.user_id, profile);
  if (to === null) return { action: "skip", why: `unreachable: the user has no ${letter.channel} address now` };
  const quiet = profile?.quiet_hours ?? null;
  const usableQuiet =
    quiet && parseClock(quiet.start) !== null && parseClock(quiet.end) !== null && isTimeZone(quiet.tz);
  const [decision] = decideRouting({
    requested: [letter.channel],
    category: letter.item.category,
    priority: letter.item.priority,
    critical: deps.criticalCategories.includes(letter.item.category),
    preferences: {
      channelOptout: profile?.channel_optout ?? [],
      categoryOptout: profile?.category_optout ?? [],
      quietHours: usableQuiet ? quiet : null,
      rateCapPerDay: null,
    },
    reach: {
      email: profile?.email ?? null,
      phone: profile?.phone ?? null,
      pushSubscriptions: profile?.device_tokens?.length ?? 0,
    },
    now: deps.now,
    quietHoursAction: "defer",
  });
  if (decision?.action === "suppress") return { action: "skip", why: `preferences today: ${decision.reason}` };
  if (decision?.action === "defer") return { action: "skip", why: `inside quiet hours until ${time(decision.until)}` };
  return {
    action: "replay",
    item: { ...letter.item, to, attempt: state.attempts },
    address_changed: to !== letter.item.to,
  };
}

const REPLAYABLE: ChannelStatus[] = ["failed", "unsettled", "pending"];

/**
 * Hands the item back to the workers: releases the send guard so the next attempt may claim it,
 * resets the channel to pending with a fresh retry budget (the one sanctioned backward move,
 * logged as such), and publishes the work item again; the workers' guard and token buckets
 * then apply as to any item. Answers why it did not, or null.
 */
export async function replay(
  deps: { database: Database; bus: Bus; guard: KV },
  item: WorkItem,
  includeUnsettled: boolean,
): Promise<string | null> {
  const key = guardKey(item.notification_id, item.channel);
  const entry = await deps.guard.get(key);
  if (entry?.operation === "PUT") {
    const value = entry.json<GuardValue>();
    if (value.state === "sent") return "the provider accepted it (send guard: sent)";
    if (value.state !== "failed") {
      const released: GuardValue = { ...value, state: "failed", at: Date.now(), reason: "released for a replay" };
      try {
        await deps.guard.update(key, new TextEncoder().encode(JSON.stringify(released)), entry.revision);
      } catch {
        return "the send guard changed meanwhile; run the replay again";
      }
    }
  }
  const statuses = includeUnsettled ? REPLAYABLE : REPLAYABLE.filter((s) => s !== "unsettled");
  const moved = await deps.database.sql`
    with moved as (
      update notification_channels set status = 'pending', reason = ${REPLAY_REASON},
        attempts_before_replay = attempts, next_attempt_at = null, updated_at = now()
      where notification_id = ${item.notification_id} and channel = ${item.channel} and status = any(${statuses})
        and (status <> 'pending' or reason = ${REPLAY_REASON})
      returning notification_id, channel, status, reason, attempts, updated_at
    )
    insert into channel_status_events (notification_id, channel, status, reason, attempt, at)
    select notification_id, channel, status, reason, attempts, updated_at from moved`;
  if (moved.count === 0) return "the channel changed meanwhile";
  await deps.bus.publish(
    deps.bus.subjects.work(item.channel, item.priority),
    item,
    `${item.notification_id}:${item.channel}:replay:${item.attempt}`,
  );
  return null;
}

const replayCommand: Command = async (argv, io, deps) => {
  const { values, positionals } = parseOptions(
    argv,
    {
      ...FILTERS,
      all: { type: "boolean" },
      "dry-run": { type: "boolean" },
      "include-unsettled": { type: "boolean" },
      json: { type: "boolean" },
    },
    ["SEQ..."],
  );
  const seqs = positionals.map((p) => {
    const n = Number(p);
    if (!Number.isSafeInteger(n) || n < 1) throw new UsageError(`"${p}" is not a dead letter's sequence`);
    return n;
  });
  const filters = parseFilters(values);
  if (seqs.length === 0 && Object.keys(filters).length === 0 && !values.all) {
    throw new UsageError("name dead letters by SEQ, or select them with filters, or pass --all");
  }
  const bus = await connect(deps);
  const guard = await bus.kv("notify_send_guard");
  let letters = await readDeadLetters(bus, filters);
  if (seqs.length > 0) letters = letters.filter((l) => seqs.includes(l.seq));
  // A channel dead-lettered more than once (replayed, failed again) is replayed from its latest letter.
  const latest = new Map<string, StoredLetter>();
  for (const l of letters) latest.set(guardKey(l.letter.item.notification_id, l.letter.channel), l);
  const selected = [...latest.values()];
  const states = await channelStates(deps.database, selected);
  const includeUnsettled = values["include-unsettled"] === true;
  const dryRun = values["dry-run"] === true;
  const context = {
    database: deps.database,
    guard,
    criticalCategories: deps.criticalCategories ?? [],
    now: new Date(),
  };

  const results: Array<{ seq: number; notification_id: string; channel: Channel; result: string; to?: string }> = [];
  let replayed = 0;
  for (const [i, l] of selected.entries()) {
    const { notification_id } = l.letter.item;
    const plan = await planReplay(
      context,
      l.letter,
      states.get(guardKey(notification_id, l.letter.channel)),
      includeUnsettled,
    );
    let result: string;
    if (plan.action === "skip") result = `skipped: ${plan.why}`;
    else if (dryRun) result = plan.address_changed ? "would replay to the user's new address" : "would replay";
    else {
      const why = await replay({ database: deps.database, bus, guard }, plan.item, includeUnsettled);
      if (why === null) replayed++;
      result = why === null ? "replayed" : `skipped: ${why}`;
    }
    results.push({
      seq: l.seq,
      notification_id,
      channel: l.letter.channel,
      result,
      ...(plan.action === "replay" ? { to: plan.item.to } : {}),
    });
    if (!values.json) io.stderr.write(`notify: ${dryRun ? "checked" : "replay"} ${i + 1}/${selected.length}\n`);
  }
  const skipped = results.filter((r) => r.result.startsWith("skipped")).length;
  const summary = dryRun
    ? `dry run: ${selected.length - skipped} would be replayed, ${skipped} skipped`
    : `${replayed} replayed, ${skipped} skipped`;
  if (values.json) {
    printJson(io, { dry_run: dryRun, data: results, summary });
    return;
  }
  if (results.length > 0) {
    io.stdout.write(
      table([
        ["SEQ", "NOTIFICATION", "CHANNEL", "TO", "RESULT"],
        ...results.map((r) => [String(r.seq), r.notification_id, r.channel, clip(r.to ?? "", 40), r.result]),
      ]),
    );
  }
  io.stdout.write(`${summary}\n`);
};

export const dlq: CommandGroup = {
  name: "dlq",
  usage: `Dead letters (notify.dlq.<channel>; needs NATS_URL as well):
  notify dlq list [--channel C] [--reason R] [--since T] [--until T] [--notification ID] [--json]
      Dead letters, oldest first, with the channel's status now. R is a class (${DEAD_LETTER_CLASSES.join(", ")})
      or part of the reason; T is a duration ago (30m, 24h, 7d) or an RFC 3339 time.
  notify dlq show SEQ [--json]
      One dead letter whole: the request, the rendered message, every attempt, the status history.
  notify dlq replay [SEQ ...] [--all | the filters of list] [--dry-run] [--include-unsettled] [--json]
      Send again through the workers (same send guard and rate limits), to the user's current
      address, if their preferences still allow it. Never resends a delivered channel; an
      unsettled one (the provider may have accepted it) only with --include-unsettled.
      --dry-run shows what would be sent and changes nothing.
`,
  commands: { list, show, replay: replayCommand },
};
