import { existsSync } from "node:fs";
import { type Browser, chromium, type Page } from "playwright-core";

/** Where Chromium is looked for: CHROMIUM_PATH, then Debian's package, then other usual places. */
const CANDIDATES = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"];

/**
 * Flags for a headless Chromium on a machine with a closed network, run as root: without the
 * background-networking ones it keeps trying Google's hosts; without --no-sandbox it refuses
 * to start as root.
 */
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export function chromiumPath(): string {
  const path = [process.env.CHROMIUM_PATH, ...CANDIDATES].find((p) => p !== undefined && p !== "" && existsSync(p));
  if (path === undefined) {
    throw new Error(
      "no Chromium to drive: `npm test` installs Debian's chromium package when run as root " +
        "(scripts/browser.mjs); elsewhere install Chromium or set CHROMIUM_PATH",
    );
  }
  return path;
}

/**
 * A headless Chromium through playwright-core for one test file, closed on teardown. A page's
 * console errors and failed requests are collected, so a test can assert there were none.
 */
export async function launchBrowser(t: { teardown(fn: () => unknown): void }): Promise<Browser> {
  const browser = await chromium.launch({ executablePath: chromiumPath(), args: FLAGS, headless: true });
  t.teardown(() => browser.close());
  return browser;
}

/** What went wrong in a page while a test drove it: console errors, uncaught errors, refused requests. */
export function watchPage(page: Page): string[] {
  const problems: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") problems.push(`console: ${message.text()}`);
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("requestfailed", (request) =>
    problems.push(`request failed: ${request.url()} ${request.failure()?.errorText ?? ""}`),
  );
  return problems;
}
