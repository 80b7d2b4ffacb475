import { createRequire } from "node:module";
import t from "tap";

// plivo is loaded when a Plivo provider is made, not when the providers are imported: workers
// (and the one-process service) without SMS never pay its memory and start-up time, and its
// change to axios's default agents does not reach them.
const plivoMain = createRequire(import.meta.url).resolve("plivo");
const loaded = () => Object.hasOwn(createRequire(import.meta.url).cache, plivoMain);

t.test("importing the providers does not load plivo; making a Plivo provider does", async (t) => {
  const providers = await import("../src/index.js");
  t.notOk(loaded(), "not loaded by the import");
  t.type(providers.verifyPlivoSignature, "function", "the signature check is there without it");
  const provider = providers.createPlivoProvider({
    authId: "MAXXXXXXXXXXXXXXXXXX",
    authToken: "token",
    baseUrl: "http://127.0.0.1:9",
    from: "+15550100",
    timeoutMs: 1000,
  });
  t.equal(provider.name, "plivo");
  t.ok(loaded(), "loaded with the first provider");
});
