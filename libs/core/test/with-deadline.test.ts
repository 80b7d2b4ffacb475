import { spawn } from "node:child_process";
import t from "tap";
import { TIMED_OUT, withDeadline } from "../src/with-deadline.js";

// A child process that answers each line it reads at once: an answer from outside this
// process, arriving whatever this process is doing.
const answerer = spawn(process.execPath, [
  "-e",
  'process.stdout.write("ready\\n"); process.stdin.on("data", (d) => process.stdout.write(`answer ${d}`));',
]);
t.teardown(() => answerer.kill());
const nextLine = (): Promise<string> =>
  new Promise((resolve) => answerer.stdout.once("data", (chunk: Buffer) => resolve(chunk.toString().trim())));

function busyFor(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {}
}

t.test("an answer that arrived while this process was stalled past the deadline wins", async (t) => {
  t.equal(await nextLine(), "ready");
  for (let round = 0; round < 3; round++) {
    const answer = nextLine();
    answerer.stdin.write(`${round}\n`);
    // Stall: the answer comes into the pipe, and the timer expires, while this process is busy.
    const race = withDeadline(answer, 100);
    busyFor(800);
    t.equal(await race, `answer ${round}`, `round ${round}: the waiting answer is taken, not a timeout`);
  }
});

t.test("a call with no answer by the deadline gets the late value", async (t) => {
  const never = new Promise<string>(() => {});
  t.equal(await withDeadline(never, 20), TIMED_OUT, "the default late value");
  const started = performance.now();
  t.same(await withDeadline(never, 50, { late: true }), { late: true }, "a given late value");
  t.ok(performance.now() - started >= 45, "not before the deadline");
});

t.test("an answer before the deadline is returned and the timer does not hold the process", async (t) => {
  t.equal(await withDeadline(Promise.resolve(7), 60_000), 7);
  await t.rejects(withDeadline(Promise.reject(new Error("refused")), 60_000), /refused/, "a failure passes through");
});
