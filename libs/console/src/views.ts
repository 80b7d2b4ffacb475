/**
 * The API's answers as the console reads them (docs/api.md is the contract). Read loosely: a
 * field the console does not know is ignored, one missing is shown as a dash, never a crash.
 */

export interface ChannelView {
  status?: string;
  provider?: string | null;
  provider_id?: string | null;
  reason?: string | null;
  next_attempt_at?: string | null;
  ts?: string;
}

export interface NotificationSummary {
  notification_id: string;
  client_id?: string;
  user_id?: string;
  category?: string;
  template_id?: string;
  priority?: string;
  status?: string;
  created_at?: string;
  deliver_by?: string | null;
  send_at?: string | null;
  send_at_local?: { time: string; date?: string } | null;
  digest?: {
    id: string;
    key: string;
    status: string;
    item_count: number;
    closes_at: string;
    notification_id: string | null;
    role: "item" | "digest";
  } | null;
  trace_id?: string | null;
  channels?: Record<string, ChannelView>;
}

/** One history entry: attempt, status, fallback, provider_switch, accepted, receipt, or one added later. */
export type TimelineEntry = Record<string, unknown> & { event?: string; at?: string };

export interface NotificationDetail extends NotificationSummary {
  timeline?: TimelineEntry[];
}

export interface ConsumerView {
  name: string;
  filter_subject?: string | null;
  num_pending?: number;
  num_ack_pending?: number;
  num_redelivered?: number;
  num_waiting?: number;
  last_active?: string | null;
}

export interface StreamView {
  name: string;
  subjects?: string[];
  messages?: number;
  bytes?: number;
  first_seq?: number;
  last_seq?: number;
  consumers?: ConsumerView[];
}

export interface LaneView {
  rate_per_second?: number;
  burst?: number;
  waiting?: number;
}

export interface WorkerReport {
  worker: string;
  breaker?: string;
  reported_at?: string;
  lanes?: Record<string, LaneView>;
}

export interface ProviderView {
  provider: string;
  channel?: string;
  breaker?: { state?: string; decided?: string | null; decided_by?: string | null; decided_at?: string | null };
  workers?: WorkerReport[];
  tokens?: Record<string, number> | null;
}

export interface DeadLetterSummary {
  seq: number;
  dead_lettered_at?: string;
  channel?: string;
  lane?: string;
  class?: string;
  reason?: string;
  provider?: string;
  attempts?: number;
  notification_id?: string;
  client_id?: string | null;
  user_id?: string;
}

export interface ReplayOutcome {
  seq: number;
  notification_id?: string;
  channel?: string;
  result?: string;
  to?: string | null;
  previous_to?: string | null;
}

export interface ReplayAnswer {
  dry_run?: boolean;
  selected?: number;
  replayed?: number;
  skipped?: number;
  data?: ReplayOutcome[];
}

export interface BroadcastView {
  broadcast_id: string;
  client_id?: string;
  audience_id?: string;
  status?: string;
  category?: string;
  template_id?: string;
  total?: number;
  expanded?: number;
  suppressed?: number;
  delivered?: number;
  failed?: number;
  created_at?: string;
  finished_at?: string | null;
}

export interface Page<T> {
  data: T[];
  page?: number;
  page_size?: number;
  total_count?: number;
}

/** One client's webhook endpoint with its figures (GET /api/v1/ops/webhook-endpoints). */
export interface WebhookEndpointView {
  id: string;
  client_id?: string;
  url?: string;
  status?: string;
  disabled_reason?: string | null;
  disabled_at?: string | null;
  failing_since?: string | null;
  figures?: {
    backlog?: number;
    dead?: number;
    last_hour?: { attempts?: number; failed?: number; latency_ms_p50?: number | null; latency_ms_p95?: number | null };
  };
}

/** One entry of the suppression list (GET /api/v1/suppressions). */
export interface SuppressionView {
  channel: string;
  address: string;
  scope?: string;
  client_id?: string | null;
  reason?: string;
  source?: {
    provider?: string;
    event?: string;
    event_id?: string;
    notification_id?: string;
    key_id?: string;
    note?: string;
  };
  created_at?: string;
}
