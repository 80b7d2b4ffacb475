import { type Bus, describeStreams, type StreamState } from "@notify/bus";
import { toAppError } from "@notify/http";

/** GET /api/v1/ops/streams: this deployment's streams and their consumers, as the server has them now. */
export async function listStreams(bus: Bus): Promise<{ data: StreamState[] }> {
  try {
    return { data: await describeStreams(bus) };
  } catch (error) {
    throw toAppError(error);
  }
}
