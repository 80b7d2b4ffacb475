/** The user's inbox token, or how to get one (from the caller's backend, which mints it with its API key). */
export type TokenOption = string | (() => string | Promise<string>);

export interface TokenSource {
  /** The token to send: the string, or the function's latest answer (asked once, then kept). */
  current(): Promise<string>;
  /**
   * A token to use instead of `stale`, which the server refused: the function's next answer
   * (one call however many requests were refused with the same token), or the one already
   * fetched when another request refreshed it first; null for a plain string, which cannot be
   * renewed.
   */
  refresh(stale: string): Promise<string | null>;
  readonly renewable: boolean;
}

export function tokenSource(option: TokenOption): TokenSource {
  if (typeof option === "string") {
    const token = Promise.resolve(option);
    return { current: () => token, refresh: async () => null, renewable: false };
  }
  // The latest call's answer, and that answer once it is in (undefined while it is asked).
  let held: Promise<string> | undefined;
  let value: string | undefined;
  const ask = () => {
    value = undefined;
    const asked = Promise.resolve()
      .then(option)
      .then((token) => {
        if (typeof token !== "string" || token === "") throw new TypeError("the token function gave no token");
        return token;
      });
    held = asked;
    asked.then(
      (token) => {
        if (held === asked) value = token;
      },
      // A failed call is not kept: the next request asks again.
      () => {
        if (held === asked) held = undefined;
      },
    );
    return asked;
  };
  return {
    renewable: true,
    current: () => held ?? ask(),
    refresh(stale) {
      // Asked already, by another refused request: its answer serves this one too.
      if (held !== undefined && value === undefined) return held;
      if (value !== undefined && value !== stale) return Promise.resolve(value);
      return ask();
    },
  };
}
