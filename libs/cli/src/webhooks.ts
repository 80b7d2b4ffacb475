import {
  listDeadDeliveries,
  listEndpoints,
  readEndpointFigures,
  replayWebhookEvents,
  updateEndpoint,
} from "@notify/db";
import { type Command, type CommandGroup, type Io, parseOptions, UsageError } from "./command.js";
import { table } from "./table.js";

const printJson = (io: Io, document: unknown): void => {
  io.stdout.write(`${JSON.stringify(document, null, 2)}\n`);
};
const time = (iso: string | null) => (iso === null ? "-" : iso.replace(/\.\d+Z$/, "Z"));

const list: Command = async (argv, io, deps) => {
  const { values } = parseOptions(argv, { client: { type: "string" }, json: { type: "boolean" } }, []);
  const endpoints = await listEndpoints(deps.database, values.client ?? null);
  const figures = await readEndpointFigures(
    deps.database,
    null,
    endpoints.map((e) => e.id),
  );
  const rows = endpoints.map((endpoint) => ({ ...endpoint, figures: figures.get(endpoint.id) }));
  if (values.json) return printJson(io, rows);
  if (rows.length === 0) {
    io.stdout.write("no webhook endpoints\n");
    return;
  }
  io.stdout.write(
    table([
      ["ID", "CLIENT", "STATUS", "BACKLOG", "DEAD", "FAILING SINCE", "URL"],
      ...rows.map((e) => [
        e.id,
        e.client_id,
        e.status === "disabled" ? `disabled (${e.disabled_reason ?? "?"})` : e.status,
        String(e.figures?.backlog ?? 0),
        String(e.figures?.dead ?? 0),
        time(e.failing_since),
        e.url,
      ]),
    ]),
  );
};

const limitOf = (value: string | undefined) => {
  if (value === undefined) return 50;
  const n = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!(n >= 1 && n <= 500)) throw new UsageError("--limit must be an integer from 1 to 500");
  return n;
};

const dead: Command = async (argv, io, deps) => {
  const { values, positionals } = parseOptions(argv, { limit: { type: "string" }, json: { type: "boolean" } }, ["ID"]);
  const id = positionals[0] as string;
  const letters = await listDeadDeliveries(deps.database, null, id, limitOf(values.limit));
  if (letters === undefined) throw new UsageError(`no webhook endpoint ${id}`);
  if (values.json) return printJson(io, letters);
  if (letters.length === 0) {
    io.stdout.write("no dead letters\n");
    return;
  }
  io.stdout.write(
    table([
      ["EVENT", "TYPE", "ATTEMPTS", "DIED", "LAST ERROR"],
      ...letters.map((l) => [l.event_id, l.event_type, String(l.attempts), time(l.died_at), l.last_error ?? "-"]),
    ]),
  );
};

const instant = (value: string, option: string): Date => {
  const at = new Date(value);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(value) || Number.isNaN(at.getTime())) {
    throw new UsageError(`${option} must be an RFC 3339 time, e.g. 2026-11-29T09:00:00Z`);
  }
  return at;
};

const replay: Command = async (argv, io, deps) => {
  const { values, positionals } = parseOptions(
    argv,
    { event: { type: "string", multiple: true }, since: { type: "string" }, until: { type: "string" } },
    ["ID"],
  );
  const id = positionals[0] as string;
  const events = values.event ?? [];
  if (events.length > 0 === (values.since !== undefined)) {
    throw new UsageError("give --event EVENT_ID (repeatable) or --since TIME [--until TIME]");
  }
  if (!events.every((e) => /^evt_[1-9]\d{0,17}$/.test(e)))
    throw new UsageError("--event takes an event id, evt_ and a number");
  const selection =
    events.length > 0
      ? { eventIds: events.map((e) => Number(e.slice(4))) }
      : {
          since: instant(values.since as string, "--since"),
          until: values.until === undefined ? new Date() : instant(values.until, "--until"),
        };
  const replayed = await replayWebhookEvents(deps.database, null, id, selection);
  if (replayed === undefined) throw new UsageError(`no webhook endpoint ${id}`);
  io.stdout.write(`${replayed} event(s) owed again to ${id}; the dispatcher posts them within a second\n`);
};

const enable: Command = async (argv, io, deps) => {
  const { positionals } = parseOptions(argv, {}, ["ID"]);
  const id = positionals[0] as string;
  const endpoint = await updateEndpoint(deps.database, null, id, { enabled: true });
  if (endpoint === undefined) throw new UsageError(`no webhook endpoint ${id}`);
  io.stdout.write(`${id} enabled; replay what it missed with: notify webhooks replay ${id} --since TIME\n`);
};

export const webhooks: CommandGroup = {
  name: "webhooks",
  usage: `Outbound webhook endpoints (every client's; clients manage their own through the API):
  notify webhooks list [--client CLIENT] [--json]
      Endpoints with their status, the deliveries owed (backlog) and dead.
  notify webhooks dead ID [--limit N] [--json]
      An endpoint's dead letters, newest first: events whose every attempt failed.
  notify webhooks replay ID (--event EVENT_ID ... | --since TIME [--until TIME])
      Post events again, dead letters included; each keeps its webhook-id.
  notify webhooks enable ID
      Enable an endpoint the service disabled after it failed for too long.
`,
  commands: { list, dead, replay, enable },
};
