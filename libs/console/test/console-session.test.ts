import t from "tap";
import { createSessionStore, csrfMatches } from "../src/session.js";

// The console's sessions: only the cookie opens one, idle and absolute limits, a bounded count.
const clock = () => {
  let now = 1_000_000;
  return { now: () => now, advance: (ms: number) => (now += ms) };
};

t.test("a session is found by its cookie value only; its hash is what is kept", async (t) => {
  const store = createSessionStore();
  const { id, session } = store.create("nk_admin");
  t.match(id, /^[A-Za-z0-9_-]{43}$/, "32 random bytes, base64url");
  t.equal(store.get(id), session);
  t.equal(store.get(undefined), undefined);
  t.equal(store.get(`${id.slice(0, -1)}${id.endsWith("A") ? "B" : "A"}`), undefined, "one character off opens nothing");
  t.equal(store.get(session.csrf), undefined, "the CSRF token is no session id");
  t.not(store.create("nk_admin").id, id, "each sign-in gets its own id");
});

t.test("idle for an hour, or twelve hours after sign-in, the session is over", async (t) => {
  const time = clock();
  const store = createSessionStore({ now: time.now });
  const { id } = store.create("k");
  const step = 59 * 60_000;
  let elapsed = 0;
  while (elapsed + step < 12 * 3_600_000) {
    time.advance(step);
    elapsed += step;
    t.ok(store.get(id), `used every 59 minutes: on after ${elapsed / 60_000} min`);
  }
  time.advance(12 * 3_600_000 - elapsed);
  t.equal(store.get(id), undefined, "twelve hours after sign-in, however used");
  const idle = store.create("k").id;
  time.advance(60 * 60_000);
  t.equal(store.get(idle), undefined, "an hour unused");
  t.equal(store.size, 0, "ended sessions are dropped");
});

t.test("at most `max` sessions: the least recently used one ends first", async (t) => {
  const store = createSessionStore({ max: 3 });
  const a = store.create("a").id;
  const b = store.create("b").id;
  const c = store.create("c").id;
  t.ok(store.get(a), "a used: b is now the least recently used");
  const d = store.create("d").id;
  t.equal(store.size, 3);
  t.equal(store.get(b), undefined, "b ended");
  for (const id of [a, c, d]) t.ok(store.get(id));
  t.equal(createSessionStore().size, 0);
});

t.test("sign-out ends the session", async (t) => {
  const store = createSessionStore();
  const { id } = store.create("k");
  store.end(id);
  t.equal(store.get(id), undefined);
  store.end(undefined);
  store.end("not-a-session-id");
});

t.test("the CSRF token matches only itself", async (t) => {
  const { session } = createSessionStore().create("k");
  t.ok(csrfMatches(session, session.csrf));
  t.notOk(csrfMatches(session, ""));
  t.notOk(csrfMatches(session, undefined));
  t.notOk(csrfMatches(session, `${session.csrf}x`));
  t.notOk(csrfMatches(session, session.csrf.slice(1)));
  t.notOk(csrfMatches(session, ["array"]));
});
