import { type Bus, readPoisonMessages } from "@notify/bus";
import { CHANNELS, DEAD_LETTER_CLASSES, instant, isChannel, REPLAY_BATCH_LIMIT, REPLAY_SCAN_LIMIT } from "@notify/core";
import {
  channelStates,
  type DeadLetterFilters,
  pageDeadLetters,
  replayDeadLetters,
  showDeadLetter,
  statusNow,
} from "@notify/ops";
import * as v from "valibot";
import { type CliDeps, type Command, type CommandGroup, type Io, parseOptions, UsageError } from "./command.js";
import { table } from "./table.js";

const FILTERS = {
  channel: { type: "string" },
  reason: { type: "string" },
  since: { type: "string" },
  until: { type: "string" },
  notification: { type: "string" },
} as const;

const UNITS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * `--since 24h` (that long ago), a day (`2026-11-01`, its midnight in UTC) or an RFC 3339 time,
 * read as the HTTP routes read their time filters: a day the calendar lacks is refused, not
 * rolled over into the next month.
 */
export function parseTime(text: string, option: string, now = Date.now()): Date {
  const relative = /^(\d+)([smhd])$/.exec(text);
  if (relative) return new Date(now - Number(relative[1]) * UNITS[relative[2] as keyof typeof UNITS]);
  const timestamp = /^\d{4}-\d\d-\d\d$/.test(text) ? `${text}T00:00:00Z` : text;
  const parsed = v.safeParse(instant(option), timestamp);
  if (parsed.success) return parsed.output;
  throw new UsageError(`${option} must be a duration such as 30m, 24h, 7d, a day or an RFC 3339 time, got "${text}"`);
}

function parseFilters(values: { [K in keyof typeof FILTERS]?: string }): DeadLetterFilters {
  const filters: DeadLetterFilters = {};
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

async function connect(deps: CliDeps): Promise<Bus> {
  if (!deps.bus) throw new Error("this command needs NATS (NATS_URL)");
  return deps.bus();
}

const time = (date: Date | string) => new Date(date).toISOString().replace(/\.\d+Z$/, "Z");
const clip = (text: string, max = 60) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);
const printJson = (io: Io, document: unknown) => io.stdout.write(`${JSON.stringify(document, null, 2)}\n`);

/** A positive integer option, or its default when it is not given. */
function positiveInteger(value: string | undefined, option: string, fallback: number, max = Number.MAX_SAFE_INTEGER) {
  const n = value === undefined ? fallback : Number(value);
  if (!Number.isSafeInteger(n) || n < 1 || n > max) {
    throw new UsageError(
      `${option} must be an integer from 1${max === Number.MAX_SAFE_INTEGER ? " up" : ` to ${max}`}`,
    );
  }
  return n;
}

/** Letters `notify dlq list` shows a page when --limit is not given, and at most. */
const LIST_LIMIT = 50;
const LIST_MAX = 1000;

const list: Command = async (argv, io, deps) => {
  const { values } = parseOptions(
    argv,
    { ...FILTERS, json: { type: "boolean" }, limit: { type: "string" }, page: { type: "string" } },
    [],
  );
  const limit = positiveInteger(values.limit, "--limit", LIST_LIMIT, LIST_MAX);
  const page = positiveInteger(values.page, "--page", 1);
  const bus = await connect(deps);
  // One page, newest first: only the page is held (and, filtered by channel and time, only it is read).
  const { letters, total } = await pageDeadLetters(bus, parseFilters(values), { offset: (page - 1) * limit, limit });
  const states = await channelStates(deps.database, letters);
  const now = (l: (typeof letters)[number]) => statusNow(states, l);
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
      page,
      page_size: limit,
      total_count: total,
    });
    return;
  }
  if (letters.length === 0) {
    io.stdout.write(total === 0 ? "no dead letters match\n" : `no dead letters on page ${page} (${total} match)\n`);
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
  const shown = (page - 1) * limit + letters.length;
  if (shown < total) {
    io.stdout.write(`${shown} of ${total}, newest first: --page ${page + 1} for the next ${limit}\n`);
  }
};

const show: Command = async (argv, io, deps) => {
  const { values, positionals } = parseOptions(argv, { json: { type: "boolean" } }, ["SEQ"]);
  const seq = Number(positionals[0]);
  if (!Number.isSafeInteger(seq) || seq < 1) throw new UsageError("SEQ must be a dead letter's stream sequence");
  const bus = await connect(deps);
  const { stored, state, history: events } = await showDeadLetter({ bus, database: deps.database }, seq);
  const { letter } = stored;
  const { notification_id } = letter.item;
  if (values.json) {
    printJson(io, {
      seq,
      dead_lettered_at: time(stored.time),
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
      ["dead-lettered", time(stored.time)],
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

const replayCommand: Command = async (argv, io, deps) => {
  const { values, positionals } = parseOptions(
    argv,
    {
      ...FILTERS,
      all: { type: "boolean" },
      "dry-run": { type: "boolean" },
      "include-unsettled": { type: "boolean" },
      "from-seq": { type: "string" },
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
  let fromSeq: number | undefined;
  if (values["from-seq"] !== undefined) {
    fromSeq = Number(values["from-seq"]);
    if (!Number.isSafeInteger(fromSeq) || fromSeq < 1) {
      throw new UsageError(`--from-seq must be a dead letter's sequence, got "${values["from-seq"]}"`);
    }
    if (seqs.length > 0) throw new UsageError("--from-seq goes with filters or --all, not with SEQ");
  }
  const bus = await connect(deps);
  const dryRun = values["dry-run"] === true;
  const { results, selected, replayed, skipped, remaining, nextSeq } = await replayDeadLetters(
    { database: deps.database, bus, criticalCategories: deps.criticalCategories ?? [] },
    {
      seqs,
      filters,
      includeUnsettled: values["include-unsettled"] === true,
      dryRun,
      ...(fromSeq !== undefined ? { fromSeq } : {}),
    },
    (done, total) => {
      if (!values.json) io.stderr.write(`notify: ${dryRun ? "checked" : "replay"} ${done}/${total}\n`);
    },
  );
  const summary = dryRun
    ? `dry run: ${selected - skipped} would be replayed, ${skipped} skipped`
    : `${replayed} replayed, ${skipped} skipped`;
  // One run takes at most REPLAY_BATCH_LIMIT letters of a selection by filters: say where the rest starts.
  const rest =
    nextSeq === null ? "" : `; up to ${remaining} more letters not looked at: run again with --from-seq ${nextSeq}`;
  if (values.json) {
    printJson(io, { dry_run: dryRun, data: results, summary: summary + rest, remaining, next_seq: nextSeq });
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
  io.stdout.write(`${summary}${rest}\n`);
};

/** Printable text of raw bytes: control and invalid bytes shown as \xNN, cut at `max`. */
const preview = (data: Uint8Array, max = 40) =>
  clip(
    [...data.slice(0, max * 4)]
      .map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, "0")}`))
      .join(""),
    max,
  );

const poison: Command = async (argv, io, deps) => {
  const { values } = parseOptions(argv, { json: { type: "boolean" }, limit: { type: "string" } }, []);
  const limit = values.limit === undefined ? 1000 : Number(values.limit);
  if (!Number.isSafeInteger(limit) || limit < 1) throw new UsageError("--limit must be a positive integer");
  const bus = await connect(deps);
  const kept = await readPoisonMessages(bus, { limit });
  if (values.json) {
    printJson(io, {
      data: kept.map((p) => ({
        seq: p.seq,
        kept_at: time(p.time),
        reason: p.reason,
        stream: p.stream,
        subject: p.subject,
        stream_seq: p.sourceSeq,
        consumer: p.consumer,
        deliveries: p.deliveries,
        data_base64: Buffer.from(p.data).toString("base64"),
      })),
    });
    return;
  }
  if (kept.length === 0) {
    io.stdout.write("no poison messages\n");
    return;
  }
  const header = ["SEQ", "KEPT", "FROM", "STREAM-SEQ", "CONSUMER", "REASON", "BYTES"];
  const rows = kept.map((p) => [
    String(p.seq),
    time(p.time),
    p.subject,
    String(p.sourceSeq),
    p.consumer,
    clip(p.reason),
    preview(p.data),
  ]);
  io.stdout.write(table([header, ...rows]));
};

export const dlq: CommandGroup = {
  name: "dlq",
  usage: `Dead letters (notify.dlq.<channel>; needs NATS_URL as well):
  notify dlq list [--channel C] [--reason R] [--since T] [--until T] [--notification ID] [--limit N] [--page P] [--json]
      Dead letters, newest first, ${LIST_LIMIT} a page (--limit up to ${LIST_MAX}), with the channel's status now and
      how many match. R is a class (${DEAD_LETTER_CLASSES.join(", ")}) or part of the reason; T is a
      duration ago (30m, 24h, 7d), a day (2026-11-01, from its midnight UTC) or an RFC 3339 time.
  notify dlq show SEQ [--json]
      One dead letter whole: the request, the rendered message, every attempt, the status history.
  notify dlq replay [SEQ ...] [--all | the filters of list] [--from-seq N] [--dry-run] [--include-unsettled] [--json]
      Send again through the workers (same send guard and rate limits), to the user's current
      address, if their preferences still allow it. Never resends a delivered channel; an
      unsettled one (the provider may have accepted it) only with --include-unsettled.
      --dry-run shows what would be sent and changes nothing. A run takes at most ${REPLAY_BATCH_LIMIT}
      letters of --all or the filters and looks at at most ${REPLAY_SCAN_LIMIT}; it says where the
      rest starts: run again with --from-seq N.
  notify dlq poison [--limit N] [--json]
      Messages no consumer could decode or validate (notify.dlq.poison.<stream>): where they were
      read, why they were refused, and their bytes (base64 in --json). Never replayed.
`,
  commands: { list, show, replay: replayCommand, poison },
};
