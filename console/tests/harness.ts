// What the console's tests and benchmark stand on: a real server process (the debug or
// release binary) on a free port with its own SQLite file and tokens, a gRPC-Web client of
// it from Node, a seeded workload, and Debian's Chromium driven by playwright-core.

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { chromium, type Browser } from "playwright-core";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { EventSchema, EventType, RankingService } from "../src/gen/ranking/v1/ranking_pb";

export const TOKENS = { read: "console-read-token", write: "console-write-token", admin: "console-admin-token" };

export interface Server {
  url: string;
  process: ChildProcess;
  /** A client calling with `token`. */
  client(token?: string): Client<typeof RankingService>;
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

/** Waits for `check` to hold, polling, up to a generous deadline. */
export async function eventually(what: string, check: () => Promise<boolean> | boolean, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      if (await check()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts the server binary with the console on, tokens set, and `env` on top. */
export async function startServer(env: Record<string, string> = {}): Promise<Server> {
  const bin = process.env.RANKING_SERVER_BIN;
  if (!bin) throw new Error("RANKING_SERVER_BIN names the server binary to test");
  const dir = mkdtempSync(join(tmpdir(), "ranking-console-"));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const environment: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    RANKING_LISTEN: `127.0.0.1:${port}`,
    DATABASE_URL: `sqlite://${join(dir, "ranking.db")}?mode=rwc`,
    RANKING_READ_TOKEN: TOKENS.read,
    RANKING_WRITE_TOKEN: TOKENS.write,
    RANKING_ADMIN_TOKEN: TOKENS.admin,
    RANKING_SHUTDOWN_GRACE: "1s",
    RUST_LOG: "warn",
    ...env,
  };
  // An empty value leaves the variable unset (a token the test does not want).
  for (const [k, v] of Object.entries(environment)) if (v === "") delete environment[k];
  const child = spawn(bin, [], { env: environment, stdio: ["ignore", "ignore", "inherit"] });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const client = (token?: string) => {
    const bearer: Interceptor = (next) => (req) => {
      if (token) req.header.set("authorization", `Bearer ${token}`);
      return next(req);
    };
    return createClient(RankingService, createGrpcWebTransport({ baseUrl: url, interceptors: [bearer] }));
  };
  const stop = async () => {
    child.kill("SIGTERM");
    await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
    child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await eventually("the server answers", async () => (await fetch(`${url}/console/`)).ok);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, process: child, client, stop };
}

/**
 * A day's worth of events over `products` products: a skewed number of views, likes and
 * orders each, so ranks are distinct, and yesterday's, so the board shows rank changes.
 */
export async function seed(server: Server, products: number): Promise<void> {
  const client = server.client(TOKENS.write);
  const admin = server.client(TOKENS.admin);
  const now = Date.now();
  const yesterday = now - 24 * 3600 * 1000;
  for (const [day, at] of [["y", yesterday], ["t", now]] as const) {
    let events: MessageInitShape<typeof EventSchema>[] = [];
    for (let p = 1; p <= products; p++) {
      // Today reverses a third of yesterday's order, so some products climb, some fall.
      const weight = day === "y" ? p : p % 3 === 0 ? products - p : p;
      const views = 1 + (weight % 17);
      for (let i = 0; i < views; i++) {
        events.push({ eventId: `${day}-v-${p}-${i}`, productId: BigInt(p), type: EventType.VIEW, occurredAt: timestampFromMs(at - i * 1000) });
      }
      if (weight % 2 === 0) events.push({ eventId: `${day}-l-${p}`, productId: BigInt(p), type: EventType.LIKE, occurredAt: timestampFromMs(at) });
      events.push({ eventId: `${day}-o-${p}`, productId: BigInt(p), type: EventType.ORDER, amount: BigInt(weight * 100), occurredAt: timestampFromMs(at) });
      if (events.length > 5_000) {
        await client.recordEvents({ events });
        events = [];
      }
    }
    if (events.length) await client.recordEvents({ events });
    if (day === "y") await admin.recompute({ date: new Date(yesterday).toISOString().slice(0, 10) });
  }
  await admin.recompute({});
}

/** Debian's Chromium, headless, with the flags it needs on this kind of machine. */
export async function browser(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.RANKING_CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
}
