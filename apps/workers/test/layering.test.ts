import { readdirSync, readFileSync } from "node:fs";
import t from "tap";

// Imports inside the workers run one way: delivery/ executes the delivery policy through the
// provider gates of providers/, and providers/ never reaches back into delivery/.
const src = new URL("../src/", import.meta.url);
const importsOf = (file: URL) =>
  [...readFileSync(file, "utf8").matchAll(/^(?:import|export)\b[^;]*?from\s+"([^"]+)"/gms)].map((m) => m[1] as string);

t.test("providers/ imports nothing from delivery/", async (t) => {
  const folder = new URL("providers/", src);
  const files = readdirSync(folder).filter((name) => name.endsWith(".ts"));
  t.ok(files.length > 0, "providers/ has files");
  for (const name of files) {
    const inward = importsOf(new URL(name, folder)).filter((specifier) => specifier.includes("delivery/"));
    t.same(inward, [], `providers/${name}`);
  }
});
