// Runs the client's tour against a running service:
//   RANKING_ENDPOINT=http://127.0.0.1:50051 RANKING_WRITE_TOKEN=… RANKING_ADMIN_TOKEN=… npm run example

import { createRankingClient } from "./index.js";
import { run } from "./tour.js";

const endpoint = process.env.RANKING_ENDPOINT ?? "http://127.0.0.1:50051";
const writer = createRankingClient({ endpoint, token: process.env.RANKING_WRITE_TOKEN });
const admin = createRankingClient({ endpoint, token: process.env.RANKING_ADMIN_TOKEN });
await run(writer, admin, `example-${Date.now()}`);
