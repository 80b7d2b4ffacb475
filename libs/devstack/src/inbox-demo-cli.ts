import { startInboxDemo } from "./inbox-demo.js";

// The inbox demo page (inbox-demo.ts) in a process of its own, started by `npm start` once the
// apps are up. Started with an IPC channel, it reports { ready: { url } } and exits when its
// parent goes. The development key comes in its environment and stays in this process.
const env = process.env;
const demo = await startInboxDemo({
  port: Number(env.PORT ?? 3016),
  host: env.HOST ?? "127.0.0.1",
  apiUrl: env.NOTIFY_BASE_URL ?? "http://127.0.0.1:3000",
  apiKey: env.NOTIFY_API_KEY ?? "",
  userId: env.INBOX_DEMO_USER ?? "user-123",
  notification: JSON.parse(env.INBOX_DEMO_NOTIFICATION ?? "{}") as Record<string, unknown>,
});
process.stdout.write(`Inbox demo listening at ${demo.url}\n`);

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  void demo.close().then(() => process.exit(0));
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
if (process.send) {
  process.send({ ready: { url: demo.url } });
  process.on("disconnect", stop);
}
