/**
 * The URL a provider called, as the provider saw it: behind a proxy or a tunnel the request
 * reaches us on another origin, and signatures cover the public one.
 */
export const publicUrl = (requestUrl: string, publicBaseUrl: string | undefined): string => {
  if (publicBaseUrl === undefined) return requestUrl;
  const request = new URL(requestUrl);
  return `${publicBaseUrl.replace(/\/+$/, "")}${request.pathname}${request.search}`;
};
