// The pieces of the processor that bench/ drives on their own, named here so that a bench never
// reaches into the app's files.
export { expandBroadcasts } from "./broadcasts/expander.js";
