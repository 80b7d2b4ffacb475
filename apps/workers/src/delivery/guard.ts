// The send guard lives in NATS KV, so its reads and compare-and-set writes belong to libs/bus;
// the delivery steps keep importing them from here.
export { claimGuard, type GuardEntry, isClaimable, readGuard, settleGuard } from "@notify/bus";
