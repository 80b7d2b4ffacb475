import { writeFileSync } from "node:fs";
import { composeNatsConfig, NATS_CONF_FILE } from "./nats-config.js";

// npm run nats:config: rewrites nats/nats.conf from the roles' access; a test fails when the
// committed file differs.
writeFileSync(NATS_CONF_FILE, composeNatsConfig());
process.stdout.write(`wrote ${NATS_CONF_FILE}\n`);
