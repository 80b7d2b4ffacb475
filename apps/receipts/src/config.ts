import { common, int, port, text } from "@notify/config";
import * as v from "valibot";

export const ReceiptsConfig = v.object({
  ...common,
  /** Port the provider webhooks (SendGrid events, Plivo reports) post to. */
  PORT: port(3003),
  HOST: text("0.0.0.0"),
  DB_POOL_SIZE: int(5, 1, 100),
});
export type ReceiptsConfig = v.InferOutput<typeof ReceiptsConfig>;
