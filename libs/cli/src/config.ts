import { archive, common } from "@notify/config";
import * as v from "valibot";

const HINT = "run it next to `npm start` (it reads .data/stack.env) or set DATABASE_URL and NATS_URL";

/** What every `notify` command that reads Postgres needs. */
export const CliConfig = v.object({
  /** Postgres connection string; next to `npm start`, read from `<DATA_DIR>/stack.env`. */
  DATABASE_URL: v.pipe(v.string(`is required: ${HINT}`), v.url("must be a URL")),
  /** statement_timeout of the command's statements (ms); 0 for none, e.g. for a long maintenance query. */
  DB_STATEMENT_TIMEOUT_MS: common.DB_STATEMENT_TIMEOUT_MS,
});

/** What `notify dlq` needs besides. */
export const NatsConfig = v.object({
  // No default: an operator's command must not land on whatever NATS answers on 4222.
  /** NATS server(s); next to `npm start`, read from `<DATA_DIR>/stack.env`. */
  NATS_URL: v.pipe(v.string(`is required: ${HINT}`), v.minLength(1)),
  NATS_NAMESPACE: common.NATS_NAMESPACE,
  LANE_PARTITIONS: common.LANE_PARTITIONS,
  /** The operator's NATS user on a server with one user per role (nats/nats.conf: operator). */
  NATS_USER: common.NATS_USER,
  NATS_PASSWORD: common.NATS_PASSWORD,
});

/** What `notify retention` reads when given neither --dir nor --url: the processor's archive settings. */
export const ArchiveConfig = v.object({
  ...archive(),
});
