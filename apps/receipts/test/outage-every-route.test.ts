import { createHmac, generateKeyPairSync, randomUUID, sign } from "node:crypto";
import {
  captureLogger,
  eventually,
  freshDatabase,
  freshNamespace,
  proxiedDependencies,
  whileCut,
} from "@notify/testing";
import t from "tap";
import { createAdminApp, createApp } from "../src/app.js";

// Receipts' half of "a transient database or NATS error on any route answers 503 problem+json
// with Retry-After, never 500": a 503 also tells SendGrid and Plivo to post the receipt again
// later, where a 500 would look like our bug. Every route the app serves (app.routes, so a new
// webhook is called too) gets a correctly signed report: first with both servers up, where it
// must succeed, then with Postgres cut, then with NATS cut.

const { url } = await freshDatabase(t);
const {
  database,
  bus,
  postgres: pgProxy,
  nats: natsProxy,
} = await proxiedDependencies(t, { url, namespace: freshNamespace(t), partitions: 1, poolSize: 2 });

const PLIVO_TOKEN = "plivo-outage-token";
const sendgridKeys = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const app = createApp({
  database,
  bus,
  log: captureLogger("receipts").log,
  isStopping: () => false,
  plivoAuthToken: PLIVO_TOKEN,
  sendgridPublicKey: sendgridKeys.publicKey.export({ format: "der", type: "spki" }).toString("base64"),
});
// Readiness lives on the operator's port: it is checked there while a dependency is cut.
const admin = createAdminApp({ database, bus, log: captureLogger("receipts-admin").log, isStopping: () => false });
const readiness = async () => {
  const response = await admin.request("/readyz");
  return { status: response.status, body: (await response.json()) as unknown };
};
const ORIGIN = "http://receipts.test";

/** A delivery report as Plivo signs it (V3: URL, sorted parameters, nonce). */
function plivoReport(): RequestInit {
  return plivoSigned("/webhooks/plivo", { MessageUUID: randomUUID(), Status: "delivered", To: "+447700900123" });
}

/** A STOP sent to our number, as Plivo signs it: it writes to the suppression list. */
function plivoInbound(): RequestInit {
  return plivoSigned("/webhooks/plivo/inbound", {
    MessageUUID: randomUUID(),
    From: "447700900123",
    To: "14155550100",
    Text: "STOP",
  });
}

function plivoSigned(path: string, params: Record<string, string>): RequestInit {
  const nonce = randomUUID();
  const sorted = Object.entries(params)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => k + v)
    .join("");
  const signature = createHmac("sha256", PLIVO_TOKEN).update(`${ORIGIN}${path}?${sorted}.${nonce}`).digest("base64");
  return {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      "x-plivo-signature-v3": signature,
      "x-plivo-signature-v3-nonce": nonce,
    },
    body: new URLSearchParams(params).toString(),
  };
}

/** An Event Webhook batch as SendGrid signs it (ECDSA over timestamp + body). */
function sendgridBatch(): RequestInit {
  const body = JSON.stringify([
    { email: "ada@example.com", event: "delivered", sg_event_id: randomUUID(), sg_message_id: `${randomUUID()}.x` },
  ]);
  const timestamp = String(Math.floor(Date.now() / 1000));
  return {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-twilio-email-event-webhook-signature": sign(
        "sha256",
        Buffer.from(timestamp + body),
        sendgridKeys.privateKey,
      ).toString("base64"),
      "x-twilio-email-event-webhook-timestamp": timestamp,
    },
    body,
  };
}

/** What each route is sent; a route not named here is sent a bare GET or POST. */
const REQUESTS: Record<string, () => RequestInit> = {
  "POST /webhooks/plivo": plivoReport,
  "POST /webhooks/plivo/inbound": plivoInbound,
  "POST /webhooks/sendgrid": sendgridBatch,
};
const routes = [...new Set(app.routes.filter((r) => r.method !== "ALL").map((r) => `${r.method} ${r.path}`))];

interface Answer {
  route: string;
  status: number;
  type: string | null;
  retryAfter: string | null;
  body: Record<string, unknown> | null;
}
const callEvery = () =>
  Promise.all(
    routes.map(async (route): Promise<Answer> => {
      const [method, path] = route.split(" ") as [string, string];
      const response = await app.request(`${ORIGIN}${path}`, REQUESTS[route]?.() ?? { method });
      const type = response.headers.get("content-type");
      const text = await response.text();
      const body = type?.includes("json") && text !== "" ? (JSON.parse(text) as Record<string, unknown>) : null;
      return { route, status: response.status, type, retryAfter: response.headers.get("retry-after"), body };
    }),
  );
const describe = (a: Answer) => `${a.route}: ${a.status} ${a.type} ${JSON.stringify(a.body)}`;
const isOutageAnswer = (a: Answer) =>
  a.status === 503 &&
  a.type === "application/problem+json" &&
  a.body?.code === "dependency_unavailable" &&
  /^\d+$/.test(a.retryAfter ?? "");

t.test("with both servers up, every signed report is taken", async (t) => {
  t.ok(routes.includes("POST /webhooks/plivo") && routes.includes("POST /webhooks/sendgrid"), "both webhooks");
  t.notOk(routes.includes("GET /readyz") || routes.includes("GET /metrics"), "no operator route on the public port");
  t.match(await readiness(), { status: 200, body: { status: "ready" } });
  for (const a of await callEvery()) t.ok(a.status >= 200 && a.status < 300, describe(a));
});

t.test("with Postgres cut, every webhook answers 503 problem+json with Retry-After, never 500", async (t) => {
  await whileCut(admin, pgProxy, "postgres", async () => {
    t.match(await readiness(), { status: 503, body: { checks: { postgres: false } } });
    for (const a of await callEvery()) {
      if (a.route === "GET /healthz") t.equal(a.status, 200, describe(a));
      else t.ok(isOutageAnswer(a), describe(a));
    }
  });
  await eventually(
    async () => ((await callEvery()).every((a) => a.status < 300) ? true : undefined),
    30_000,
    "receipts to take reports again",
  );
});

t.test("with NATS cut, only readiness notices: no route needs it, none answers 500", async (t) => {
  await whileCut(admin, natsProxy, "nats", async () => {
    t.match(await readiness(), { status: 503, body: { checks: { nats: false } } });
    for (const a of await callEvery()) {
      t.ok(a.status < 500 || isOutageAnswer(a), describe(a));
    }
  });
});
