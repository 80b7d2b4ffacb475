// npm run soak: the embedded default (`npm start` with neither DATABASE_URL nor NATS_URL) under a
// steady load of mixed notifications for a long while, as a newcomer's laptop would run it
// overnight. Prints what was sent, what settled, what was lost or received twice by a provider,
// the error-level log lines, and the memory of every process (proportional set size), sampled during the run.
//   SOAK_SECONDS (600), SOAK_RATE notifications/s (100), SOAK_USERS (20), DATA_DIR (a fresh one)
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  devKey,
  errorLines,
  npmStart,
  postNotification,
  receivedByProviders,
  stackEnv,
  stackMemory,
} from "@notify/testing";

const seconds = Number(process.env.SOAK_SECONDS ?? 600);
const rate = Number(process.env.SOAK_RATE ?? 100);
const userCount = Number(process.env.SOAK_USERS ?? 20);
const dataDir = process.env.DATA_DIR ?? mkdtempSync(join(tmpdir(), "notify-soak-"));

const CHANNEL_SETS = [["email", "sms", "push", "in_app"], ["email", "in_app"], ["push", "in_app"], ["email"], ["sms"]];
const LANES = ["transactional", "promotional"];

const stack = npmStart(dataDir);
const stopStack = async () => {
  try {
    process.kill(-stack.child.pid, "SIGTERM");
  } catch {}
  await stack.exited;
};
process.on("SIGINT", () => void stopStack().then(() => process.exit(130)));
await stack.running;
const env = stackEnv(dataDir);
const base = env.NOTIFY_BASE_URL;
const auth = { authorization: `Bearer ${devKey(dataDir)}` };
console.log(`soak: ${rate}/s for ${seconds} s on ${userCount} users, data in ${dataDir}`);

// Users with an address, a phone and a push subscription of the sandbox's.
const ca = readFileSync(env.PUSH_SANDBOX_CA, "utf8");
const users = [];
for (let i = 0; i < userCount; i++) {
  const userId = `soak-${i}`;
  await put(`/api/v1/users/${userId}/contacts`, {
    email: `${userId}@example.com`,
    phone: `+1415555${String(1000 + i)}`,
  });
  const { id: _id, ...subscription } = await subscribe();
  await put(`/api/v1/users/${userId}/preferences`, { device_tokens: [subscription] });
  users.push(userId);
}

const accepted = [];
let refused = 0;
let inFlight = 0;
let behind = 0;
const peakRss = {};
const started = Date.now();
const sample = () => {
  for (const [role, kb] of Object.entries(stackMemory(dataDir))) {
    peakRss[role] = { rss: Math.max(peakRss[role]?.rss ?? 0, kb.rss), pss: Math.max(peakRss[role]?.pss ?? 0, kb.pss) };
  }
};
const sampler = setInterval(sample, 5000);
let n = 0;
const tickMs = 100;
const perTick = rate / (1000 / tickMs);
let owed = 0;
while (Date.now() - started < seconds * 1000) {
  owed += perTick;
  while (owed >= 1) {
    owed -= 1;
    if (inFlight >= 500) {
      behind++;
      continue;
    }
    const i = n++;
    inFlight++;
    void post(i)
      .then((id) => (id ? accepted.push({ id, channels: CHANNEL_SETS[i % CHANNEL_SETS.length] }) : refused++))
      .finally(() => inFlight--);
  }
  const next = started + Math.ceil((Date.now() - started + 1) / tickMs) * tickMs;
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, next - Date.now())));
  if (n % (rate * 60) < perTick)
    console.log(`  ${Math.round((Date.now() - started) / 1000)} s: ${accepted.length} accepted`);
}
while (inFlight > 0) await new Promise((resolve) => setTimeout(resolve, 50));
const sendSeconds = (Date.now() - started) / 1000;
console.log(`sending done: ${accepted.length} accepted in ${sendSeconds.toFixed(0)} s; waiting for them to settle`);

// Drain: every accepted notification reaches a settled status, or the wait ends.
const WAITING = new Set(["accepted", "processing"]);
const statuses = new Map();
let open = accepted.map((a) => a.id);
const drainDeadline = Date.now() + 180_000;
while (open.length > 0 && Date.now() < drainDeadline) {
  const still = [];
  for (let i = 0; i < open.length; i += 50) {
    const slice = open.slice(i, i + 50);
    const views = await Promise.all(slice.map((id) => get(`/api/v1/notifications/${id}`)));
    views.forEach((view, j) => {
      statuses.set(slice[j], view);
      if (view === null || WAITING.has(view.status)) still.push(slice[j]);
    });
  }
  open = still;
  if (open.length > 0) await new Promise((resolve) => setTimeout(resolve, 2000));
}
const drainSeconds = (Date.now() - started) / 1000 - sendSeconds;
sample();
clearInterval(sampler);
const endRss = stackMemory(dataDir);

const received = await receivedByProviders(dataDir);
let duplicated = 0;
let unsettled = 0;
let lost = 0;
for (const { id, channels } of accepted) {
  const view = statuses.get(id);
  if (!view) {
    lost++;
    continue;
  }
  for (const channel of channels) {
    const times = received.get(`${id}:${channel}`) ?? 0;
    if (times > 1) duplicated++;
    const status = view.channels?.[channel]?.status;
    if (status === "unsettled") unsettled++;
    else if (status === "delivered" && times === 0) lost++;
  }
}
const terminal = accepted.length - open.length;
const errors = errorLines(stack.output);
await stopStack();

const rows = Object.keys({ ...peakRss, ...endRss }).sort();
console.log(`
soak summary (${seconds} s at ${rate}/s offered, ${userCount} users, mixed channels and lanes)
  sent (202)          ${accepted.length}   (refused: ${refused}, not sent because 500 were in flight: ${behind})
  terminal            ${terminal}   (still open after ${drainSeconds.toFixed(0)} s of drain: ${open.length})
  lost                ${lost}   (accepted but unknown, or delivered without reaching the provider)
  duplicated          ${duplicated}   (a provider received a (notification, channel) twice)
  unsettled channels  ${unsettled}
  error log lines     ${errors.length}${errors.length ? `\n    ${errors.slice(0, 10).join("\n    ")}` : ""}

  memory (MB)            RSS peak   RSS end   PSS peak   PSS end
${rows
  .map((role) => {
    const mb = (kb) => ((kb ?? 0) / 1024).toFixed(0).padStart(8);
    return `  ${role.padEnd(22)} ${mb(peakRss[role]?.rss)}  ${mb(endRss[role]?.rss)}  ${mb(peakRss[role]?.pss)}  ${mb(endRss[role]?.pss)}`;
  })
  .join("\n")}
`);
process.exit(lost || duplicated || errors.length || open.length ? 1 : 0);

function post(i) {
  const body = {
    user_id: users[i % users.length],
    category: "account",
    template_id: "welcome",
    data: { name: `Ada ${i}` },
    priority: LANES[i % LANES.length],
    channels: CHANNEL_SETS[i % CHANNEL_SETS.length],
  };
  return postNotification(base, devKey(dataDir), body, { deadlineMs: 5000 }).catch(() => null);
}

async function get(path) {
  const response = await fetch(`${base}${path}`, { headers: auth }).catch(() => null);
  if (!response?.ok) return null;
  return response.json();
}

async function put(path, body) {
  const response = await fetch(`${base}${path}`, {
    method: "PUT",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`PUT ${path}: ${response.status} ${await response.text()}`);
}

async function subscribe() {
  const { request } = await import("node:https");
  return new Promise((resolve, reject) => {
    request(`${env.PUSH_SANDBOX_URL}/sandbox/subscriptions`, { method: "POST", ca }, (res) => {
      let text = "";
      res.on("data", (chunk) => {
        text += chunk;
      });
      res.on("end", () => resolve(JSON.parse(text)));
    })
      .on("error", reject)
      .end();
  });
}
