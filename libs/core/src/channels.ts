/** The closed set of delivery channels. Identifiers travel in JSON bodies and NATS subjects. */
export const CHANNELS = ["push", "email", "sms", "in_app"] as const;
export type Channel = (typeof CHANNELS)[number];
export const isChannel = (value: string): value is Channel => (CHANNELS as readonly string[]).includes(value);

/** Priority lanes. Transactional traffic never waits behind promotional traffic. */
export const PRIORITIES = ["transactional", "promotional"] as const;
export type Priority = (typeof PRIORITIES)[number];
