#!/usr/bin/env node
// The `npm test` reporter (package.json "tap".reporter): one line per test file as it finishes;
// for a failing file, each failed assertion (name, source, diff or error) and the comments and
// log lines that file printed; at the end one summary line and the slowest files. Plain lines
// only, no cursor movement, so a terminal and a CI log read the same. tap's own reporters
// either print every file's comments (--comments, including the whole-stack tests' app log
// lines) or none, and redraw a progress area that piles up in a log.
// Also a filter: `node scripts/tap-reporter.mjs < run.tap` reports a saved raw TAP stream.
import { Transform } from "node:stream";
import { fileURLToPath } from "node:url";
import { Parser } from "tap-parser";

/** Lines of a failing file's own output shown; the rest is in .tap/test-results/<file>.tap. */
const MAX_OUTPUT_LINES = 200;
const SLOWEST = 5;

const useColor = process.stdout.isTTY && !process.env.NO_COLOR && process.env.TERM !== "dumb";
const paint = (code) => (text) => (useColor ? `\x1b[${code}m${text}\x1b[0m` : text);
const red = paint("31");
const green = paint("32");
const yellow = paint("33");
const dim = paint("2");
const bold = paint("1");

const seconds = (ms) =>
  ms >= 60_000 ? `${Math.floor(ms / 60_000)}m${Math.round((ms % 60_000) / 1000)}s` : `${(ms / 1000).toFixed(1)}s`;
const indent = (text, by) =>
  String(text)
    .trimEnd()
    .split("\n")
    .map((line) => by + line)
    .join("\n");
const PROCEDURAL = /^#\s*(Subtest(:|$)|time=)/;

/** One failed assertion: where it is, the source around it, the diff or the error, the rest. */
function describeFailure(result, file) {
  const name = result.fullname.startsWith(`${file} > `) ? result.fullname.slice(file.length + 3) : result.name;
  const lines = [red(`  ✖ ${name || "(the file itself)"}`)];
  const { at, source, diff, stack, found, wanted, ...rest } = result.diag ?? {};
  // How tap spawned the file: the same for every file, and no help in finding the failure.
  for (const key of ["compare", "test", "stdio", "cwd", "externalID", "command", "args", "env"]) delete rest[key];
  if (at?.fileName) lines.push(dim(`    at ${at.fileName}:${at.lineNumber}:${at.columnNumber}`));
  if (typeof source === "string") lines.push(indent(source, "    "));
  if (typeof diff === "string" && diff.trim()) {
    lines.push(
      indent(diff, "    ")
        .split("\n")
        .map((l) => (/^\s*-(?!--)/.test(l) ? green(l) : /^\s*\+(?!\+\+)/.test(l) ? red(l) : l))
        .join("\n"),
    );
  } else if (found !== undefined || wanted !== undefined) {
    lines.push(`    wanted: ${JSON.stringify(wanted)}`, `    found:  ${JSON.stringify(found)}`);
  }
  for (const [key, value] of Object.entries(rest)) {
    const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
    lines.push(text.includes("\n") ? `    ${key}:\n${indent(text, "      ")}` : `    ${key}: ${text}`);
  }
  // A thrown error: where it came from, which is often not the line the test is on.
  const compared = (typeof diff === "string" && diff.trim()) || found !== undefined || wanted !== undefined;
  if (typeof stack === "string" && stack.trim() && !compared) lines.push(dim(`    stack:\n${indent(stack, "      ")}`));
  return lines.join("\n");
}

export default class Reporter extends Transform {
  #parser = new Parser();
  #started = Date.now();
  #files = [];

  constructor() {
    super({ encoding: "utf8" });
    /** Per test file: its comments and stray output, its failures; filled while it streams. */
    const current = new Map();
    this.#parser.on("child", (child) => {
      const state = { output: [], failures: [], counts: null };
      current.set(child.name, state);
      const collect = (parser) => {
        parser.on("comment", (line) => {
          if (!PROCEDURAL.test(line.trim())) state.output.push(line.trim().replace(/^# ?/, ""));
        });
        parser.on("extra", (line) => state.output.push(line.trimEnd().replace(/^ {4}/, "")));
        parser.on("child", collect);
      };
      collect(child);
      child.on("complete", (results) => {
        state.counts = results;
      });
    });
    this.#parser.on("fail", (result) => {
      const file = [...current.keys()].find((f) => result.fullname === f || result.fullname.startsWith(`${f} > `));
      if (file !== undefined) current.get(file).failures.push(result);
    });
    this.#parser.on("assert", (result) => {
      // A file past tap's --timeout is answered "not ok - timeout!" in its place.
      const name = current.has(result.name) ? result.name : (result.diag?.expired ?? result.name);
      const state = current.get(name) ?? { output: [], failures: [], counts: null };
      current.delete(name);
      this.#file(name, result, state);
    });
    this.#parser.on("bailout", (reason) => this.push(red(bold(`\nBail out! ${reason}\n`))));
    // A file's stray stdout reaches the runner's stream outside its subtest.
    this.#parser.on("extra", (line) => {
      const streaming = [...current.values()].at(-1);
      if (streaming) streaming.output.push(line.trimEnd().replace(/^ {4}/, ""));
      else this.push(line);
    });
    this.#parser.on("complete", () => this.#summary());
  }

  #file(name, result, { output, failures, counts }) {
    const { count = 0, fail = 0, skip = 0, todo = 0 } = counts ?? {};
    const time = result.time ?? 0;
    this.#files.push({ name, ok: result.ok, skip: !!result.skip, time });
    const extras = [skip && `${skip} skipped`, todo && `${todo} todo`].filter(Boolean).join(", ");
    const tail = dim(`${seconds(time)}${extras ? `, ${extras}` : ""}`);
    if (result.skip) {
      this.push(`${yellow("skip")}  ${name}  ${dim(String(result.skip))}\n`);
      return;
    }
    if (result.ok) {
      this.push(`${green("ok")}    ${name}  ${dim(`${count} passed`)}  ${tail}\n`);
      return;
    }
    // No failed assertion inside: the file itself failed (a crash, a timeout, a bad exit code).
    const why = failures.length > 0 ? `${fail} of ${count} failed` : name === result.name ? "failed" : result.name;
    this.push(`${red(bold("FAIL"))}  ${name}  ${red(why)}  ${tail}\n`);
    for (const failure of failures.length > 0 ? failures : [result]) this.push(`${describeFailure(failure, name)}\n`);
    if (output.length > 0) {
      const omitted = Math.max(0, output.length - MAX_OUTPUT_LINES);
      const heading = `  output of ${name}${omitted ? ` (its last ${MAX_OUTPUT_LINES} of ${output.length} lines)` : ""}:`;
      this.push(`${dim(heading)}\n${indent(output.slice(omitted).join("\n"), "  │ ")}\n`);
    }
    this.push(dim(`  full TAP: .tap/test-results/${name}.tap\n\n`));
  }

  #summary() {
    const failed = this.#files.filter((f) => !f.ok);
    const passed = this.#files.filter((f) => f.ok && !f.skip).length;
    const skipped = this.#files.filter((f) => f.skip).length;
    const parts = [
      failed.length ? red(bold(`${failed.length} failed`)) : null,
      green(`${passed} passed`),
      skipped ? yellow(`${skipped} skipped`) : null,
    ].filter(Boolean);
    const slowest = [...this.#files]
      .sort((a, b) => b.time - a.time)
      .slice(0, SLOWEST)
      .map((f) => `${f.name} ${seconds(f.time)}`);
    this.push(
      `\n${bold("test files:")} ${parts.join(", ")} of ${this.#files.length}  ${dim(seconds(Date.now() - this.#started))}\n`,
    );
    if (slowest.length) this.push(dim(`slowest (time inside the file): ${slowest.join(", ")}\n`));
    for (const f of failed) this.push(`${red("failed:")} ${f.name}\n`);
  }

  _transform(chunk, _encoding, done) {
    this.#parser.write(chunk);
    done();
  }

  _flush(done) {
    this.#parser.end();
    done();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.stdin.pipe(new Reporter()).pipe(process.stdout);
}
