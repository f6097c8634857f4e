// A real server for the tests: the binary named by RANKING_SERVER_BIN, its own SQLite file,
// port and tokens, stopped by the returned function.

import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRankingClient } from "../src/index.js";

export const TOKENS = { read: "node-client-read", write: "node-client-write", admin: "node-client-admin" };

export interface Server {
  endpoint: string;
  /** PEM of the server's certificate when it serves TLS. */
  ca?: string;
  stop(): Promise<void>;
}

/** A certificate for 127.0.0.1 and its key, made by openssl in `dir`. */
function selfSigned(dir: string): { cert: string; key: string } {
  const cert = join(dir, "cert.pem");
  const key = join(dir, "key.pem");
  execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
    { stdio: "ignore" });
  return { cert, key };
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

export async function startServer(env: Record<string, string> = {}, tls = false): Promise<Server> {
  const bin = process.env.RANKING_SERVER_BIN;
  if (!bin) throw new Error("RANKING_SERVER_BIN names the ranking server binary the client is tested against");
  const dir = mkdtempSync(join(tmpdir(), "ranking-node-client-"));
  const port = await freePort();
  const certificate = tls ? selfSigned(dir) : undefined;
  if (certificate) Object.assign(env, { RANKING_TLS_CERT: certificate.cert, RANKING_TLS_KEY: certificate.key });
  const ca = certificate ? readFileSync(certificate.cert, "utf8") : undefined;
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
  const endpoint = `${tls ? "https" : "http"}://127.0.0.1:${port}`;
  const probe = createRankingClient({ endpoint, ca, retry: { maxAttempts: 1 }, deadlineMs: 1_000 });
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      await probe.getAccess({});
      return { endpoint, ca, stop };
    } catch (error) {
      if (exited || Date.now() > deadline) {
        await stop();
        throw new Error(`the server did not answer: ${error}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
