import fc from "fast-check";
import t from "tap";
import {
  base64UrlBytes,
  canonicalLocale,
  localeFallbackChain,
  pushEndpointProblem,
  sortChannels,
  webPushKeyProblems,
} from "../src/index.js";

t.test("locales are BCP 47 and stored in canonical form", async (t) => {
  t.equal(canonicalLocale("en-gb"), "en-GB");
  t.equal(canonicalLocale("EN"), "en");
  t.equal(canonicalLocale("zh-hant-tw"), "zh-Hant-TW");
  t.equal(canonicalLocale("de-CH-1996"), "de-CH-1996");
  for (const bad of ["", "languages", "en_US", "e", "en-", "123", "en--GB"]) {
    t.equal(canonicalLocale(bad), null, `rejects ${JSON.stringify(bad)}`);
  }
});

t.test("locale fallback: the locale, then shorter tags down to the language, then the default", async (t) => {
  t.same(localeFallbackChain("en-GB", "en"), ["en-GB", "en"]);
  t.same(localeFallbackChain("fr-CA", "en"), ["fr-CA", "fr", "en"]);
  t.same(localeFallbackChain("zh-Hant-TW", "en"), ["zh-Hant-TW", "zh-Hant", "zh", "en"]);
  t.same(
    localeFallbackChain("de-DE-u-co-phonebk", "de"),
    ["de-DE-u-co-phonebk", "de-DE-u-co", "de-DE", "de"],
    "a singleton left at the end goes too",
  );
  t.same(localeFallbackChain(null, "en"), ["en"]);
  t.same(localeFallbackChain("en", "en"), ["en"]);
});

t.test("property: the chain starts with the locale, ends with the default, and only shortens", async (t) => {
  const tag = fc.constantFrom("en", "en-GB", "zh-Hant-TW", "sr-Latn-RS", "es-419", "de-CH-1996", "pt-BR");
  fc.assert(
    fc.property(tag, tag, (locale, fallback) => {
      const chain = localeFallbackChain(locale, fallback);
      return (
        chain[0] === locale &&
        chain.at(-1) === (chain.includes(fallback) ? chain.at(-1) : fallback) &&
        chain.includes(fallback) &&
        new Set(chain).size === chain.length &&
        chain.slice(1).every((c, i) => c === fallback || (chain[i] as string).startsWith(`${c}-`))
      );
    }),
  );
  t.pass("held");
});

const point = Buffer.concat([Buffer.from([4]), Buffer.alloc(64, 7)]).toString("base64url");
const secret = Buffer.alloc(16, 9).toString("base64url");

t.test("web push subscriptions: keys of the right size, https endpoints only", async (t) => {
  t.same(webPushKeyProblems({ p256dh: point, auth: secret }), []);
  t.equal(webPushKeyProblems({ p256dh: Buffer.alloc(65, 2).toString("base64url"), auth: secret }).length, 1);
  t.equal(webPushKeyProblems({ p256dh: point, auth: `${secret}AA` }).length, 1);
  t.equal(webPushKeyProblems({ p256dh: "not base64!", auth: "x" }).length, 2);
  t.equal(pushEndpointProblem("https://fcm.googleapis.com/fcm/send/abc"), null);
  t.match(pushEndpointProblem("http://push.example.com/x"), /https/);
  t.match(pushEndpointProblem("https://user:pw@push.example.com/x"), /credentials/);
  t.match(pushEndpointProblem("https://push.example.com/x#y"), /fragment/);
  t.match(pushEndpointProblem("/relative"), /absolute/);
});

t.test("property: base64UrlBytes counts the bytes Buffer encodes", async (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 100 }), fc.boolean(), (bytes, pad) => {
      let text = Buffer.from(bytes).toString("base64url");
      if (pad) text += "=".repeat((4 - (text.length % 4)) % 4);
      return text === "" ? base64UrlBytes(text) === -1 : base64UrlBytes(text) === bytes.length;
    }),
  );
  t.pass("held");
});

t.test("channel sets are canonical", async (t) => {
  t.same(sortChannels(["sms", "push", "sms"]), ["push", "sms"]);
});
