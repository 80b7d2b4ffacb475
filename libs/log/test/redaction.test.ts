import t from "tap";
import { createLogger, leanLogger, REDACT_PATHS, safeUrl } from "../src/index.js";

t.test("secrets are redacted whatever object carries them", async (t) => {
  const lines: string[] = [];
  const log = createLogger({
    name: "t",
    level: "info",
    destination: { write: (l: string) => lines.push(l) } as unknown as NodeJS.WritableStream,
  });
  log.info(
    {
      apiKey: "ntf_secret1",
      headers: { authorization: "Bearer ntf_secret2", "x-api-key": "ntf_secret3" },
      config: { SENDGRID_API_KEY: "SG.secret4", SMTP_URL: "smtp://notify:relay-secret5@relay:587" },
      user: { password: "pw" },
    },
    "hello",
  );
  const out = lines.join("");
  for (const secret of ["ntf_secret1", "ntf_secret2", "ntf_secret3", "SG.secret4", "relay-secret5", '"pw"'])
    t.notMatch(out, secret);
  t.match(out, /\[redacted\]/);
});

t.test("safeUrl masks a connection password", async (t) => {
  t.equal(safeUrl("postgres://app:hunter2@db:5432/notify"), "postgres://app:***@db:5432/notify");
  t.equal(safeUrl("not a url"), "[unparseable url]");
});

t.test("a lean logger redacts every top-level secret key, writes the same line, and is made once", async (t) => {
  const lines: string[] = [];
  const log = createLogger({
    name: "t",
    level: "info",
    destination: { write: (l: string) => lines.push(l) } as unknown as NodeJS.WritableStream,
  });
  const lean = leanLogger(log);
  t.equal(leanLogger(log), lean, "one child per logger");
  const topLevel = REDACT_PATHS.filter((path) => !/[.[]/.test(path));
  t.ok(topLevel.includes("token") && topLevel.includes("apiKey"));
  lean.info(Object.fromEntries([...topLevel.map((key) => [key, `secret-${key}`]), ["n", 1]]), "line");
  const line = JSON.parse(lines[0] as string) as Record<string, unknown>;
  for (const key of topLevel) t.equal(line[key], "[redacted]", key);
  log.info({ n: 1 }, "same");
  lean.info({ n: 1 }, "same");
  const strip = (l: string) => l.replace(/"time":"[^"]*",/, "");
  t.equal(strip(lines[2] as string), strip(lines[1] as string), "the same fields as the logger's own line");
});
