// The console's benchmark: the bundle's size gzipped, and the time from navigation to a
// drawn board (the page's own "board-drawn" mark, in Chromium's performance timeline) on
// loopback with 10,000 ranked products, over ten cold loads. Printed as Markdown.

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { browser, seed, startServer } from "./harness";

const PRODUCTS = 10_000;
const LOADS = 10;

async function main(): Promise<void> {
  const dist = join(import.meta.dirname, "..", "dist");
  const files = ["index.html", ...readdirSync(join(dist, "assets")).map((f) => join("assets", f))];
  const sizes = files.map((f) => {
    const bytes = readFileSync(join(dist, f));
    return { f, raw: bytes.length, gz: gzipSync(bytes, { level: 9 }).length };
  });
  const total = sizes.reduce((a, s) => a + s.gz, 0);
  console.log("\n## The console\n");
  console.log("| file | bytes | gzipped |\n|---|---:|---:|");
  for (const s of sizes) console.log(`| ${s.f.replace(/-[\w-]{8}\./, "-….")} | ${s.raw} | ${s.gz} |`);
  console.log(`| **all** | ${sizes.reduce((a, s) => a + s.raw, 0)} | **${total}** (target ≤ 250 kB) |`);

  // Open reads: the time measured is the board's, not a token prompt's.
  const server = await startServer({ RANKING_READ_TOKEN: "" });
  try {
    await seed(server, PRODUCTS);
    const chromium = await browser();
    const times: number[] = [];
    for (let i = 0; i < LOADS; i++) {
      const context = await chromium.newContext();
      const page = await context.newPage();
      await page.goto(`${server.url}/console/#/board`);
      await page.locator("#board tbody tr[data-product]").nth(19).waitFor();
      times.push(await page.evaluate(() => performance.getEntriesByName("board-drawn")[0].startTime));
      await context.close();
    }
    await chromium.close();
    times.sort((a, b) => a - b);
    const median = times[Math.floor(times.length / 2)];
    console.log(`\nNavigation → drawn board (top 20 of ${PRODUCTS} ranked, loopback, cold cache, ${LOADS} loads): median ${median.toFixed(0)} ms, fastest ${times[0].toFixed(0)} ms, slowest ${times[times.length - 1].toFixed(0)} ms (target ≤ 500 ms).`);
  } finally {
    await server.stop();
  }
}

await main();
