// A real server for the tests: the binary named by RANKING_SERVER_BIN, its own SQLite file,
// port and tokens, stopped by the returned function.

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRankingClient } from "../src/index.js";

export const TOKENS = { read: "node-client-read", write: "node-client-write", admin: "node-client-admin" };

export interface Server {
  endpoint: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

export async function startServer(env: Record<string, string> = {}): Promise<Server> {
  const bin = process.env.RANKING_SERVER_BIN;
  if (!bin) throw new Error("RANKING_SERVER_BIN names the ranking server binary the client is tested against");
  const dir = mkdtempSync(join(tmpdir(), "ranking-node-client-"));
  const port = await freePort();
  const child = spawn(bin, [], {
    env: {
      PATH: process.env.PATH ?? "",
      RANKING_LISTEN: `127.0.0.1:${port}`,
      DATABASE_URL: `sqlite://${join(dir, "ranking.db")}?mode=rwc`,
      RANKING_READ_TOKEN: TOKENS.read,
      RANKING_WRITE_TOKEN: TOKENS.write,
      RANKING_ADMIN_TOKEN: TOKENS.admin,
      RANKING_METRICS_LISTEN: "",
      RANKING_SHUTDOWN_GRACE: "1s",
      RUST_LOG: "warn",
      ...env,
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
  let exited = false;
  const gone = new Promise<void>((resolve) => child.once("exit", () => ((exited = true), resolve())));
  const stop = async () => {
    child.kill("SIGTERM");
    await Promise.race([gone, new Promise((r) => setTimeout(r, 10_000))]);
    child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  const endpoint = `http://127.0.0.1:${port}`;
  const probe = createRankingClient({ endpoint, retry: { maxAttempts: 1 }, deadlineMs: 1_000 });
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      await probe.getAccess({});
      return { endpoint, stop };
    } catch (error) {
      if (exited || Date.now() > deadline) {
        await stop();
        throw new Error(`the server did not answer: ${error}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
