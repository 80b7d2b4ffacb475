import { randomUUID } from "node:crypto";
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { eventually } from "@notify/testing";
import type { ConnectionState, InboxItem } from "../src/index.js";

/** The service as a caller's backend and its users meet it: an API key, users, in-app notifications. */
export function service(baseUrl: string, apiKey: string) {
  const auth = { authorization: `Bearer ${apiKey}` };

  /** What the caller's backend does for its user's client: mints an inbox token with its API key. */
  const mint = async (userId: string) => {
    const res = await fetch(`${baseUrl}/api/v1/users/${encodeURIComponent(userId)}/inbox-tokens`, {
      method: "POST",
      headers: auth,
    });
    if (res.status !== 201) throw new Error(`mint: ${res.status} ${await res.text()}`);
    return ((await res.json()) as { token: string }).token;
  };

  /** Every token of the user stops working (their streams get `token_ended`). */
  const revokeAll = async (userId: string) => {
    const res = await fetch(`${baseUrl}/api/v1/users/${encodeURIComponent(userId)}/inbox-tokens`, {
      method: "DELETE",
      headers: auth,
    });
    if (res.status !== 204) throw new Error(`revoke: ${res.status} ${await res.text()}`);
    // A token minted in the revocation's millisecond counts as revoked too.
    await new Promise((resolve) => setTimeout(resolve, 5));
  };

  /** An in-app notification to the user, through the whole pipeline; its marker is in the item's body. */
  const send = async (userId: string, marker: string) => {
    const res = await fetch(`${baseUrl}/api/v1/notifications`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json", "idempotency-key": randomUUID() },
      body: JSON.stringify({
        user_id: userId,
        category: "account",
        template_id: "welcome",
        data: { name: marker },
        priority: "transactional",
        channels: ["in_app"],
      }),
    });
    if (res.status !== 202) throw new Error(`send: ${res.status} ${await res.text()}`);
  };

  /** The user's items as the server lists them (every filter), newest first. */
  const stored = async (userId: string): Promise<InboxItem[]> => {
    const token = await mint(userId);
    const items: InboxItem[] = [];
    let cursor: string | null = null;
    do {
      const query: string = `filter=all&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const res = await fetch(`${baseUrl}/api/v1/inbox?${query}`, { headers: { "x-inbox-token": token } });
      const page = (await res.json()) as { data: InboxItem[]; next_cursor: string | null };
      items.push(...page.data);
      cursor = page.next_cursor;
    } while (cursor !== null);
    return items;
  };

  /** Waits until the workers stored `count` items of the user. */
  const storedCount = (userId: string, count: number) =>
    eventually(
      async () => {
        const items = await stored(userId);
        return items.length >= count ? items : undefined;
      },
      30_000,
      `${count} inbox items of ${userId}`,
    );

  return { mint, revokeAll, send, stored, storedCount };
}

/** What a connection reported: its items in order, counts, states (with their errors). */
export function recorder() {
  const items: InboxItem[] = [];
  const counts: Array<{ unread: number; unseen: number; total: number }> = [];
  const states: Array<{ state: ConnectionState; error?: Error }> = [];
  return {
    items,
    counts,
    states,
    handlers: {
      onItem: (item: InboxItem) => items.push(item),
      onCounts: (c: { unread: number; unseen: number; total: number }) => counts.push(c),
      onState: (state: ConnectionState, error?: Error) => states.push(error ? { state, error } : { state }),
    },
    /** The latest state. */
    get state() {
      return states.at(-1)?.state;
    },
    waitFor: <T>(what: string, check: () => T | undefined, timeoutMs = 30_000) =>
      eventually(async () => check(), timeoutMs, what),
  };
}

export type Intercept = (req: IncomingMessage, res: ServerResponse) => boolean;

/**
 * An HTTP proxy in front of ingest, as a company proxy or CDN sits between a browser and the
 * service: passes every request on, except those `intercept` answers itself (it returns true).
 */
export async function startHttpProxy(target: string, intercept: Intercept) {
  const upstream = new URL(target);
  const server = createServer((req, res) => {
    if (intercept(req, res)) return;
    const forwarded = httpRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forwarded.on("error", () => res.destroy());
    req.pipe(forwarded);
    res.on("close", () => forwarded.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Each id once? The ids seen more than once. */
export const doubled = (items: InboxItem[]) => items.map((i) => i.id).filter((id, i, all) => all.indexOf(id) !== i);
