import fc from "fast-check";
import t from "tap";
import {
  credentialKeys,
  generateSignedKey,
  type InboxTokenClaims,
  isSignedInboxToken,
  keyForm,
  SCOPES,
  scopesInclude,
  signInboxToken,
  verifyInboxToken,
} from "../src/index.js";

const keys = credentialKeys("deployment-secret-one");
const otherDeployment = credentialKeys("deployment-secret-two");
const BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

t.test("a minted key is signed for its deployment only, and any change of it is refused", async () => {
  fc.assert(
    fc.property(fc.nat(), fc.constantFrom(...BASE64URL), (at, replacement) => {
      const key = generateSignedKey(keys);
      if (keyForm(keys, key) !== "signed") return false;
      if (keyForm(otherDeployment, key) !== "forged") return false;
      const index = 4 + (at % (key.length - 4));
      if (key[index] === "." || key[index] === replacement) return true;
      const changed = `${key.slice(0, index)}${replacement}${key.slice(index + 1)}`;
      return keyForm(keys, changed) !== "signed";
    }),
    { numRuns: 2000 },
  );
});

t.test("a string that is not a key of the signed form is unsigned, never signed", async (t) => {
  fc.assert(
    fc.property(fc.string({ maxLength: 120 }), (key) => keyForm(keys, key) !== "signed"),
    { numRuns: 2000 },
  );
  t.equal(keyForm(keys, `ntf_${"a".repeat(43)}`), "unsigned", "a key without a MAC");
  t.equal(keyForm(keys, `ntf_${"a".repeat(43)}.${"b".repeat(22)}`), "forged");
});

const claims = fc.record<InboxTokenClaims>({
  tokenId: fc.uuid(),
  userId: fc.string({ minLength: 1, maxLength: 200, unit: "grapheme" }),
  clientId: fc.stringMatching(/^[A-Za-z0-9_.:-]{1,64}$/),
  keyId: fc.uuid(),
  issuedAt: fc.integer({ min: 0, max: 2 ** 40 }),
  expiresAt: fc.integer({ min: 0, max: 2 ** 40 }),
});

t.test("an inbox token carries its claims and only this deployment's verify", async (t) => {
  fc.assert(
    fc.property(claims, (given) => {
      const token = signInboxToken(keys, given);
      t.ok(isSignedInboxToken(token));
      t.same(verifyInboxToken(keys, token), given);
      t.equal(verifyInboxToken(otherDeployment, token), null);
    }),
    { numRuns: 300 },
  );
});

t.test("a token with any character changed, truncated or extended does not verify", async () => {
  fc.assert(
    fc.property(claims, fc.nat(), fc.constantFrom(...BASE64URL), (given, at, replacement) => {
      const token = signInboxToken(keys, given);
      const index = 4 + (at % (token.length - 4));
      if (token[index] === "." || token[index] === replacement) return true;
      const changed = `${token.slice(0, index)}${replacement}${token.slice(index + 1)}`;
      return (
        verifyInboxToken(keys, changed) === null &&
        verifyInboxToken(keys, token.slice(0, -1)) === null &&
        verifyInboxToken(keys, `${token}A`) === null
      );
    }),
    { numRuns: 1000 },
  );
  fc.assert(
    fc.property(fc.string({ maxLength: 300 }), (token) => verifyInboxToken(keys, token) === null),
    { numRuns: 2000 },
  );
});

t.test("scopes: operator includes every scope, admin every client scope, the rest only themselves", async (t) => {
  for (const scope of SCOPES) t.ok(scopesInclude(["operator"], scope), `operator includes ${scope}`);
  for (const scope of SCOPES) {
    t.equal(scopesInclude(["admin"], scope), scope !== "operator", `admin and ${scope}`);
  }
  for (const held of SCOPES.filter((s) => s !== "admin" && s !== "operator")) {
    for (const wanted of SCOPES) t.equal(scopesInclude([held], wanted), held === wanted, `${held} and ${wanted}`);
  }
  t.notOk(scopesInclude(["preferences"], "contacts"), "preferences does not write addresses");
  t.notOk(scopesInclude([], "read"));
});
