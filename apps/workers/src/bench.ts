// The pieces of the workers that bench/ measures against its floors, named here so that a bench
// never reaches into the app's files.
export { createRateLimiter } from "./providers/rate-limiter.js";
