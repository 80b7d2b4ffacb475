import { AppError } from "@notify/core";
import type { MiddlewareHandler } from "hono";
import { responseHeaders } from "./headers.js";

export interface VersionLifecycle {
  /** When the version is (or will be) deprecated; announced with the Deprecation header. */
  deprecatedAt?: Date | undefined;
  /** After this instant the version answers 410. */
  sunsetAt?: Date | undefined;
  /** Where the migration guide is (Link rel="deprecation"). */
  link?: string | undefined;
}

/** RFC 9745: a Structured Field Date, "@" and unix seconds. */
export const deprecationHeader = (at: Date) => `@${Math.floor(at.getTime() / 1000)}`;

/**
 * The deprecation lifecycle of a path-versioned API: a deprecated version
 * keeps working and says so (Deprecation, Sunset as an HTTP-date, Link to the migration
 * guide); after its sunset date it answers 410 Gone. Null for a current version, which has
 * nothing to announce: no middleware at all rather than one that only passes requests on.
 */
export function versionLifecycle(
  version: string,
  lifecycle: VersionLifecycle,
  now: () => Date = () => new Date(),
): MiddlewareHandler | null {
  const headers: Record<string, string> = {};
  if (lifecycle.deprecatedAt) headers.deprecation = deprecationHeader(lifecycle.deprecatedAt);
  if (lifecycle.sunsetAt) headers.sunset = lifecycle.sunsetAt.toUTCString();
  if (lifecycle.link) headers.link = `<${lifecycle.link}>; rel="deprecation"; type="text/html"`;
  if (Object.keys(headers).length === 0 && !lifecycle.sunsetAt) return null;
  return (c, next) => {
    if (lifecycle.sunsetAt && now() >= lifecycle.sunsetAt) {
      throw new AppError("version_sunset", `API ${version} reached its sunset on ${lifecycle.sunsetAt.toUTCString()}`, {
        context: { headers },
      });
    }
    return responseHeaders(c, next, headers);
  };
}
