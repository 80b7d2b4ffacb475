import { DURATION_BUCKETS, type MetricsRegistry } from "@notify/http";

/** The delivery series of a worker process (docs/operations.md: Metrics). */
export function createDeliveryMetrics(registry: MetricsRegistry) {
  return {
    queueDepth: registry.gauge(
      "notify_delivery_queue_depth",
      "Work items in NOTIFY_WORK not yet handed to any worker",
      ["channel", "lane"],
    ),
    ackPending: registry.gauge(
      "notify_delivery_ack_pending",
      "Work items handed to workers and not yet settled: in flight, waiting for a retry, or parked",
      ["channel", "lane"],
    ),
    inFlight: registry.gauge("notify_delivery_in_flight", "Work items being handled by this process", [
      "channel",
      "lane",
    ]),
    outcomes: registry.counter(
      "notify_delivery_outcomes_total",
      "Work items handled, by the channel status they moved to (skipped: already settled or duplicate)",
      ["channel", "lane", "status"],
    ),
    sends: registry.counter(
      "notify_provider_sends_total",
      "Provider calls by result: accepted, transient, permanent, gone (push subscription removed), unknown (no answer)",
      ["provider", "channel", "result"],
    ),
    sendSeconds: registry.histogram(
      "notify_provider_send_duration_seconds",
      "Duration of provider calls",
      DURATION_BUCKETS,
      ["provider"],
    ),
    retries: registry.counter("notify_delivery_retries_total", "Retries scheduled after a transient failure", [
      "provider",
      "channel",
    ]),
    deadLetters: registry.counter("notify_dead_letters_total", "Items dead-lettered, by class", ["channel", "class"]),
    poison: registry.counter(
      "notify_poison_messages_total",
      "Messages that could not be decoded or validated, set aside on notify.dlq.poison.<stream> and acknowledged",
      ["stream"],
    ),
    breakerState: registry.gauge(
      "notify_provider_breaker_state",
      "1 for the circuit breaker's current state (closed, half_open, open), 0 for the others",
      ["provider", "state"],
    ),
    breakerTransitions: registry.counter(
      "notify_provider_breaker_transitions_total",
      "Circuit breaker state changes, by the state entered",
      ["provider", "state"],
    ),
    rateWaits: registry.counter(
      "notify_rate_limit_waits_total",
      "Sends that waited for a token of the provider's bucket, its rate spent",
      ["provider", "lane"],
    ),
    rateWaitSeconds: registry.histogram(
      "notify_rate_limit_wait_seconds",
      "Time sends waited for a token of the provider's bucket",
      DURATION_BUCKETS,
      ["provider", "lane"],
    ),
    subscriptionsRemoved: registry.counter(
      "notify_push_subscriptions_removed_total",
      "Push subscriptions removed from users' device tokens after the push service reported them gone",
    ),
  };
}
export type DeliveryMetrics = ReturnType<typeof createDeliveryMetrics>;
