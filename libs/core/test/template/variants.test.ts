import t from "tap";
import {
  isHtmlBody,
  MAX_BODY_TEMPLATE_LENGTH,
  MAX_SUBJECT_LENGTH,
  subjectProblem,
  TEMPLATE_ID_PATTERN,
} from "../../src/template/variants.js";

t.test("variants: email needs a subject, SMS cannot have one", async (t) => {
  t.ok(subjectProblem("email", null));
  t.ok(subjectProblem("email", "  "));
  t.equal(subjectProblem("email", "Hi"), null);
  t.ok(subjectProblem("sms", "Hi"));
  t.equal(subjectProblem("sms", null), null);
  t.equal(subjectProblem("push", null), null);
});

t.test("only email bodies are HTML", async (t) => {
  t.equal(isHtmlBody("email"), true);
  for (const channel of ["sms", "push", "in_app"] as const) t.equal(isHtmlBody(channel), false, channel);
});

t.test("template ids are URL-safe and bounded; sizes are a header line and 64 KiB", async (t) => {
  for (const id of ["welcome", "order.shipped:v2", "a", `a${"b".repeat(127)}`]) t.ok(TEMPLATE_ID_PATTERN.test(id), id);
  for (const id of ["", "-x", "a/b", "a b", "é", `a${"b".repeat(128)}`]) t.notOk(TEMPLATE_ID_PATTERN.test(id), id);
  t.equal(MAX_SUBJECT_LENGTH, 998);
  t.equal(MAX_BODY_TEMPLATE_LENGTH, 65_536);
});
