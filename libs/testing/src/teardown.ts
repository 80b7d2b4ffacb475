/** What a helper needs of a tap test: a place to register its cleanup. */
export interface Teardown {
  teardown(fn: () => unknown): void;
}
