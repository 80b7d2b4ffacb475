import fc from "fast-check";
import t from "tap";
import {
  listUnsubscribeHeaders,
  offersUnsubscribe,
  signUnsubscribeToken,
  type UnsubscribeClaims,
  unsubscribeKey,
  verifyUnsubscribeToken,
} from "../src/index.js";

const key = unsubscribeKey("deployment-secret-one");
const otherDeployment = unsubscribeKey("deployment-secret-two");

const claims = fc.record<UnsubscribeClaims>({
  clientId: fc.stringMatching(/^[A-Za-z0-9_.:-]{1,64}$/),
  userId: fc.string({ minLength: 1, maxLength: 256, unit: "grapheme" }),
  category: fc.stringMatching(/^[a-z0-9][a-z0-9_.-]{0,63}$/),
});

t.test("a token carries its claims, and only this deployment's key verifies it", async () => {
  fc.assert(
    fc.property(claims, (given) => {
      const token = signUnsubscribeToken(key, given);
      const back = verifyUnsubscribeToken(key, token);
      return (
        /^[A-Za-z0-9_.-]+$/.test(token) &&
        back !== null &&
        back.clientId === given.clientId &&
        back.userId === given.userId &&
        back.category === given.category &&
        verifyUnsubscribeToken(otherDeployment, token) === null
      );
    }),
    { numRuns: 1000 },
  );
});

t.test("any single byte of a token changed, dropped or added: refused", async () => {
  fc.assert(
    fc.property(claims, fc.nat(), fc.integer({ min: 0, max: 255 }), (given, at, byte) => {
      const token = Buffer.from(signUnsubscribeToken(key, given));
      const index = at % token.length;
      if (token[index] === byte) return true;
      const changed = Buffer.from(token);
      changed[index] = byte;
      const dropped = Buffer.concat([token.subarray(0, index), token.subarray(index + 1)]);
      const added = Buffer.concat([token.subarray(0, index), Buffer.from([byte]), token.subarray(index)]);
      return [changed, dropped, added].every((bytes) => verifyUnsubscribeToken(key, bytes.toString("latin1")) === null);
    }),
    { numRuns: 3000 },
  );
});

t.test("arbitrary strings never throw and never verify", async () => {
  fc.assert(
    fc.property(fc.oneof(fc.string({ maxLength: 400 }), fc.string({ maxLength: 400, unit: "binary" })), (text) => {
      return verifyUnsubscribeToken(key, text) === null;
    }),
    { numRuns: 3000 },
  );
  // Well-formed tokens around a MAC that is not the key's: each part valid on its own.
  fc.assert(
    fc.property(fc.base64String({ maxLength: 200 }), fc.stringMatching(/^[A-Za-z0-9_-]{22}$/), (body, mac) => {
      const token = `${body.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "") || "A"}.${mac}`;
      return verifyUnsubscribeToken(key, token) === null;
    }),
    { numRuns: 2000 },
  );
});

t.test("a signed body that is not a claims array is refused", async (t) => {
  const sign = (value: unknown) => {
    const body = Buffer.from(JSON.stringify(value)).toString("base64url");
    const mac = signUnsubscribeToken(key, { clientId: "x", userId: "y", category: "z" }).split(".")[1];
    return `${body}.${mac}`;
  };
  // Without the key no other body can be signed; these prove the parse refuses them even so.
  t.equal(verifyUnsubscribeToken(key, sign([2, "c", "u", "news"])), null);
  t.equal(verifyUnsubscribeToken(key, sign({})), null);
});

const settings = { baseUrl: "https://notify.example.com/", categories: ["digest"], criticalCategories: ["security"] };
const email = { client_id: "shop", user_id: "ada", category: "news", priority: "promotional" as const };

t.test("promotional email and listed categories carry both headers; other transactional email none", async (t) => {
  const headers = listUnsubscribeHeaders(key, settings, email);
  const link = /^<https:\/\/notify\.example\.com\/u\/([A-Za-z0-9_.-]+)>$/.exec(headers?.["List-Unsubscribe"] ?? "");
  t.ok(link, "one https link, no doubled slash");
  t.same(verifyUnsubscribeToken(key, link?.[1] ?? ""), { clientId: "shop", userId: "ada", category: "news" });
  t.equal(headers?.["List-Unsubscribe-Post"], "List-Unsubscribe=One-Click");

  t.equal(listUnsubscribeHeaders(key, settings, { ...email, priority: "transactional" }), null);
  t.ok(listUnsubscribeHeaders(key, settings, { ...email, priority: "transactional", category: "digest" }));
  t.equal(listUnsubscribeHeaders(key, settings, { ...email, client_id: undefined }), null, "no client, no link");

  const both = listUnsubscribeHeaders(key, { ...settings, mailto: "unsubscribe@example.com" }, email);
  t.match(
    both?.["List-Unsubscribe"],
    /^<https:\/\/notify\.example\.com\/u\/[^>]+>, <mailto:unsubscribe@example\.com\?subject=unsubscribe%20[^>]+>$/,
  );
});

t.test(
  "email of a critical category carries no header, whatever its priority, unless its category is listed",
  async (t) => {
    // Routing sends a critical category whatever the user's opt-outs: a link would opt out of nothing.
    const security = { ...email, category: "security" };
    t.equal(offersUnsubscribe(settings, security), false, "promotional, but critical");
    t.equal(listUnsubscribeHeaders(key, settings, security), null);
    t.equal(listUnsubscribeHeaders(key, settings, { ...security, priority: "transactional" }), null);
    const listed = { ...settings, categories: ["digest", "security"] };
    t.ok(listUnsubscribeHeaders(key, listed, security), "listed in UNSUBSCRIBE_CATEGORIES: the operator's choice");
    t.ok(listUnsubscribeHeaders(key, settings, email), "a promotional category that is not critical still carries it");
  },
);
