// The providers' deadline is the shared one: a provider call raced against its timeout.
export { TIMED_OUT, withDeadline } from "@notify/core";
