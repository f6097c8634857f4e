// The console in a real browser against a real server: what the board, product, movers,
// catalog and controls pages show is what the API serves; they move without a reload; a wrong token is
// refused in words; every control is reachable by keyboard; axe-core finds no violation; at
// 360 px nothing overflows. Screenshots of each page go to target/console/.

import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { EventType, Window } from "../src/gen/ranking/v1/ranking_pb";
import { TOKENS, browser, eventually, seed, startServer, type Server } from "./harness";

const PRODUCTS = 300;
const SHOTS = process.env.RANKING_CONSOLE_SHOTS ?? "screenshots";
const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
const fmt = new Intl.NumberFormat("en-US", { maximumFractionDigits: 4 });

let server: Server;
let chromium: Browser;

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  // A variant beside the service's profile, for the Board's and Compare's profile fields.
  const likes = join(dirname(fileURLToPath(import.meta.url)), "../../deploy/profiles/likes-first.toml");
  server = await startServer({ RANKING_PROFILES: `likes=${likes}` });
  await seed(server, PRODUCTS);
  chromium = await browser();
});

after(async () => {
  await chromium?.close();
  await server?.stop();
});

/** A page of a fresh browser context that has given `token` at the token prompt. */
async function open(token: string, hash = "#/board", width = 1280): Promise<{ context: BrowserContext; page: Page; foreign: string[] }> {
  const context = await chromium.newContext({ viewport: { width, height: 900 } });
  const page = await context.newPage();
  const foreign: string[] = [];
  const origin = new URL(server.url).origin;
  page.on("request", (r) => {
    const url = r.url();
    if (!url.startsWith("data:") && new URL(url).origin !== origin) foreign.push(url);
  });
  await page.goto(`${server.url}/console/${hash}`);
  await giveToken(page, token);
  return { context, page, foreign };
}

/** Answers the token prompt the page opens when a call needs a token (kept per tab). */
async function giveToken(page: Page, token: string): Promise<void> {
  await page.locator("#token-input").waitFor();
  await page.fill("#token-input", token);
  await page.getByRole("button", { name: "Use token" }).click();
}

async function boardRows(page: Page): Promise<{ id: string; score: string; text: string }[]> {
  return page.$$eval("#board tbody tr[data-product]", (rows) =>
    rows.map((r) => ({
      id: r.getAttribute("data-product") ?? "",
      score: r.querySelector("td.score")?.getAttribute("data-score") ?? "",
      text: r.querySelector("td.score")?.textContent ?? "",
    })),
  );
}

test("the board lists exactly GetTopN's first 20, in order, with their scores", async () => {
  const { context, page, foreign } = await open(TOKENS.read);
  await page.locator("#board tbody tr[data-product]").nth(19).waitFor();
  const served = await server.client(TOKENS.read).getTopN({ window: Window.DAILY, limit: 20 });
  const rows = await boardRows(page);
  assert.deepEqual(
    rows,
    served.products.map((p) => ({ id: String(p.productId), score: String(p.score), text: fmt.format(p.score) })),
  );
  assert.match((await page.textContent("#board-version")) ?? "", /Version \d\d:\d\d:\d\d · \d+ s ago · 300 ranked/);
  await page.screenshot({ path: join(SHOTS, "board.png"), fullPage: true });
  assert.deepEqual(foreign, [], "no request to any other host");
  await context.close();
});

test("the board pages beyond the top 100 with GetTopN's page tokens", async () => {
  const { context, page } = await open(TOKENS.read, "#/board?window=daily&size=100");
  await page.locator("#board tbody tr[data-product]").nth(99).waitFor();
  await page.getByRole("button", { name: "Next page" }).click();
  await page.getByText("Page 2", { exact: true }).waitFor();
  const second = await server.client(TOKENS.read).getTopN({ window: Window.DAILY, offset: 100, limit: 100 });
  await page.waitForFunction((id) => document.querySelector("#board tbody tr[data-product]")?.getAttribute("data-product") === id, String(second.products[0].productId));
  assert.deepEqual((await boardRows(page)).map((r) => r.id), second.products.map((p) => String(p.productId)));
  await page.getByRole("button", { name: "Previous page" }).click();
  await page.getByText("Page 1 (live)").waitFor();
  await context.close();
});

test("an order recorded while the board is open moves its product up without a reload", async () => {
  const { context, page } = await open(TOKENS.read);
  await page.locator("#board tbody tr[data-product]").nth(19).waitFor();
  await page.evaluate(() => ((window as unknown as { marker: number }).marker = 42));
  const rows = await boardRows(page);
  const climber = rows[14].id;
  await server.client(TOKENS.write).recordEvent({
    event: { eventId: `climb-${climber}`, productId: BigInt(climber), type: EventType.ORDER, amount: 100_000_000n, occurredAt: timestampFromMs(Date.now()) },
  });
  await page.waitForFunction((id) => document.querySelector("#board tbody tr[data-product]")?.getAttribute("data-product") === id, climber, { timeout: 60_000 });
  assert.equal(await page.evaluate(() => (window as unknown as { marker?: number }).marker), 42, "the page was not reloaded");
  await context.close();
});

test("the product page's drawn parts sum to the served main score, and its norms are ExplainRank's", async () => {
  const id = 150n;
  const { context, page } = await open(TOKENS.read, `#/product?id=${id}`);
  await page.locator("#main-score").waitFor();
  const explained = await server.client(TOKENS.read).explainRank({ productId: id });
  const parts = await page.$$eval("tr.part-row", (rows) => rows.map((r) => Number(r.getAttribute("data-points"))));
  const sum = parts.reduce((a, b) => a + b, 0);
  assert.ok(parts.length >= 2, "views, orders and the carry-over are drawn");
  assert.ok(Math.abs(sum - explained.mainScore) <= 1e-9 * Math.max(1, explained.mainScore), `${sum} = ${explained.mainScore}`);
  assert.equal(Number(await page.getAttribute("#main-score", "data-main")), explained.mainScore);
  const norms = await page.$$eval("tr[data-axis]", (rows) => rows.map((r) => [r.getAttribute("data-axis"), r.querySelector("td.norm")?.textContent]));
  assert.deepEqual(norms, explained.axes.map((a) => [a.axis, String(a.norm)]));
  const rank = await server.client(TOKENS.read).getRank({ productId: id, window: Window.DAILY });
  assert.equal(await page.textContent("#rank"), `${rank.product!.rank} of ${rank.total}`);
  // The last 90 days: the kept history of the daily board (yesterday was recomputed ended).
  const past = await server.client(TOKENS.read).getRankHistory({ productId: id });
  await page.locator("#best-rank").waitFor();
  assert.ok(past.bestRank > 0n, "yesterday's board is kept");
  assert.equal(await page.textContent("#best-rank"), `${fmt.format(past.bestRank)} on ${past.bestRankDate}`);
  const dots = await page.$$eval("circle.rank-dot", (cs) => cs.map((c) => [c.getAttribute("data-date"), c.getAttribute("data-rank")]));
  assert.deepEqual(dots, past.days.filter((d) => d.rank > 0n).map((d) => [d.date, String(d.rank)]));
  await page.screenshot({ path: join(SHOTS, "product.png"), fullPage: true });
  await context.close();
});

test("hiding a product on the catalog page takes it off the open board", async () => {
  const { context, page } = await open(TOKENS.admin);
  await page.locator("#board tbody tr[data-product]").nth(19).waitFor();
  const third = (await boardRows(page))[2].id;
  const editor = await context.newPage();
  await editor.goto(`${server.url}/console/#/board`);
  await giveToken(editor, TOKENS.admin);
  await editor.getByRole("link", { name: "Catalog" }).click();
  await editor.getByLabel("Product").fill(third);
  await editor.getByLabel("Hidden from every ranking").check();
  await editor.getByRole("button", { name: "Save" }).click();
  await editor.getByText(`Saved: product ${third} is hidden`).waitFor();
  await editor.screenshot({ path: join(SHOTS, "catalog.png"), fullPage: true });
  await page.waitForFunction((id) => !document.querySelector(`#board tbody tr[data-product="${id}"]`), third, { timeout: 60_000 });
  await server.client(TOKENS.admin).updateCatalog({ products: [{ productId: BigInt(third), hidden: false }] });
  // Served again before the next test reads the board (its pages are of one version).
  await eventually("the product is ranked again", async () => (await server.client(TOKENS.read).getRank({ productId: BigInt(third), window: Window.DAILY })).product !== undefined);
  await context.close();
});

test("repeated clicks on Next draw the page asked for last", async () => {
  const { context, page } = await open(TOKENS.read, "#/board?window=daily&size=20");
  await page.locator("#board tbody tr[data-product]").nth(19).waitFor();
  // Two clicks in one task: the second comes while the first page is still being read.
  await page.evaluate(() => {
    const next = [...document.querySelectorAll("button")].find((b) => b.textContent === "Next page")!;
    next.click();
    next.click();
  });
  await page.getByText("Page 3", { exact: true }).waitFor();
  const third = await server.client(TOKENS.read).getTopN({ window: Window.DAILY, offset: 40, limit: 20 });
  await page.waitForFunction((id) => document.querySelector("#board tbody tr[data-product]")?.getAttribute("data-product") === id, String(third.products[0].productId));
  assert.deepEqual((await boardRows(page)).map((r) => r.id), third.products.map((p) => String(p.productId)));
  assert.equal(await page.textContent(".page-label"), "Page 3");
  await context.close();
});

test("a product link keeps keyboard focus while the live board redraws", async () => {
  const { context, page } = await open(TOKENS.read);
  await page.locator("#board tbody tr[data-product]").nth(19).waitFor();
  const rows = await boardRows(page);
  const held = rows[4].id;
  await page.locator(`#board tr[data-product="${held}"] a`).focus();
  const climber = rows[12].id;
  await server.client(TOKENS.write).recordEvent({
    event: { eventId: `focus-${climber}`, productId: BigInt(climber), type: EventType.ORDER, amount: 100_000_000n, occurredAt: timestampFromMs(Date.now()) },
  });
  await page.waitForFunction((id) => document.querySelector("#board tbody tr[data-product]")?.getAttribute("data-product") === id, climber, { timeout: 60_000 });
  const focused = await page.evaluate(() => document.activeElement?.closest("tr")?.getAttribute("data-product"));
  assert.equal(focused, held, "the link the reader was on still has focus after the redraw");
  await context.close();
});

test("the skip link moves to the content and stays on the page", async () => {
  const { context, page } = await open(TOKENS.read, "#/movers?window=daily&within=100");
  await page.locator("h1", { hasText: "Movers" }).waitFor();
  await page.locator("a.skip").focus();
  await page.keyboard.press("Enter");
  assert.equal(await page.evaluate(() => document.activeElement?.id), "main");
  assert.match(page.url(), /#\/movers/);
  assert.equal(await page.textContent("h1"), "Movers");
  await context.close();
});

test("the catalog page is offered only to a token that may change the catalog", async () => {
  for (const [token, offered] of [[TOKENS.read, false], [TOKENS.write, true], [TOKENS.admin, true]] as const) {
    const { context, page } = await open(token);
    const access = await server.client(token).getAccess({});
    assert.equal(access.catalog, offered, "as GetAccess says");
    const link = page.locator('a[data-page="catalog"]');
    // The board is drawn after the access is known (a write token reads nothing: it waits
    // for the link instead).
    if (offered) await link.waitFor();
    else await page.locator("#board tbody tr[data-product]").first().waitFor();
    assert.equal(await link.isVisible(), offered);
    assert.equal(await page.locator('a[data-page="controls"]').isVisible(), access.admin, "the controls page is offered to the admin token alone");
    await context.close();
  }
});

test("a wrong token is refused in words", async () => {
  const { context, page } = await open("not-the-token");
  await page.getByText("The service refused this token (invalid bearer token)").waitFor();
  await context.close();
});

test("the movers page lists what ListMovers lists", async () => {
  const { context, page } = await open(TOKENS.read, "#/movers?window=daily&within=100");
  await page.locator("#rising-title").waitFor();
  const rising = await server.client(TOKENS.read).listMovers({ window: Window.DAILY, limit: 20, withinTop: 100n });
  const shown = await page.$$eval('section[aria-labelledby="rising-title"] tbody th a', (as) => as.map((a) => a.textContent));
  assert.deepEqual(shown, rising.products.map((p) => `Product ${p.productId}`));
  assert.ok(shown.length > 0, "the seeded days have movers");
  await page.screenshot({ path: join(SHOTS, "movers.png"), fullPage: true });
  await context.close();
});

test("a pin put on the controls page is served on the board, marked, beside the organic board", async () => {
  const reader = server.client(TOKENS.read);
  const pinned = (await reader.getTopN({ window: Window.DAILY, offset: 40, limit: 1 })).products[0];
  const { context, page } = await open(TOKENS.admin);
  await page.getByRole("link", { name: "Controls" }).click();
  await page.locator("form.control-form").waitFor();
  await page.getByLabel("Id", { exact: true }).fill("console-pin");
  await page.locator("form.control-form select[name=kind]").selectOption("pin");
  await page.locator('form.control-form input[name="product"]').fill(String(pinned.productId));
  await page.getByLabel("Position").fill("1");
  await page.getByLabel("Note").fill("campaign");
  await page.getByRole("button", { name: "Save" }).click();
  await page.getByText(/Saved console-pin \(revision \d+\)/).waitFor();
  await page.locator('#controls tr[data-control="console-pin"]').waitFor();
  // No window named: the control acts on every window, and the list says so.
  assert.equal(await page.textContent('#controls tr[data-control="console-pin"] td:nth-child(3)'), "whole ranking, every window");

  // The boards side by side are PreviewTopN's, organic and served, once the pin is served.
  const served = async () => (await reader.previewTopN({ selector: { limit: 20 } })).products.map((p) => String(p.productId));
  const organic = (await reader.previewTopN({ selector: { limit: 20 }, organic: true })).products.map((p) => String(p.productId));
  assert.equal((await served())[0], String(pinned.productId));
  await page.getByRole("button", { name: "Show" }).click();
  const column = (board: string) => page.$$eval(`table[data-board="${board}"] tbody tr`, (rows) => rows.map((r) => r.getAttribute("data-product")));
  await page.waitForFunction((id) => document.querySelector('table[data-board="served"] tbody tr')?.getAttribute("data-product") === id, String(pinned.productId));
  assert.deepEqual(await column("served"), await served());
  assert.deepEqual(await column("organic"), organic);
  assert.equal(await page.textContent('table[data-board="served"] tbody tr .mark'), "pinned");

  // A draft boost previewed, not saved: served with it, stored without it.
  const lifted = organic[10];
  await page.getByLabel("Id", { exact: true }).fill("console-draft");
  await page.locator("form.control-form select[name=kind]").selectOption("boost");
  await page.getByLabel("Products", { exact: true }).fill(lifted);
  await page.getByLabel("Points (negative buries)").fill("1000000");
  await page.getByRole("button", { name: "Preview draft" }).click();
  await page.getByText("Served, with the draft console-draft").waitFor();
  const drafted = await reader.previewTopN({
    selector: { limit: 20 },
    drafts: [{ controlId: "console-draft", action: { case: "boost", value: { productIds: [BigInt(lifted)], points: 1_000_000 } } }],
  });
  assert.deepEqual(await column("served"), drafted.products.map((p) => String(p.productId)));
  assert.deepEqual((await column("served")).slice(0, 2), [String(pinned.productId), lifted]);
  assert.equal(await page.textContent(`table[data-board="served"] tr[data-product="${lifted}"] .mark`), "boosted");
  assert.equal((await reader.listControls({})).controls.some((c) => c.controlId === "console-draft"), false, "a preview writes nothing");
  await page.screenshot({ path: join(SHOTS, "controls.png"), fullPage: true });

  // The board marks the pinned entry, with its organic rank.
  await page.goto(`${server.url}/console/#/board`);
  await page.waitForFunction((id) => document.querySelector("#board tbody tr[data-product]")?.getAttribute("data-product") === id, String(pinned.productId), { timeout: 60_000 });
  assert.equal(await page.textContent("#board tbody tr .mark.pinned"), "pinned");
  assert.equal(await page.textContent("#board tbody tr .organic"), `organic ${pinned.rank}`);
  await page.screenshot({ path: join(SHOTS, "board-pinned.png"), fullPage: true });

  // Deleted from the list, the pin leaves the board.
  await page.goto(`${server.url}/console/#/controls`);
  await page.getByRole("button", { name: "Delete console-pin" }).click();
  await page.getByText("Deleted console-pin.").waitFor();
  await eventually("the pin is no longer served", async () => (await reader.getTopN({ window: Window.DAILY, limit: 1 })).products[0].productId !== pinned.productId);
  await context.close();
});

test("titles from the catalog name the products on the board", async () => {
  const admin = server.client(TOKENS.admin);
  const first = (await admin.getTopN({ window: Window.DAILY, limit: 1 })).products[0];
  await admin.updateCatalog({ products: [{ productId: first.productId, title: "Trail runner 2" }] });
  const { context, page } = await open(TOKENS.read);
  await page.locator("#board tbody tr[data-product]").first().waitFor();
  assert.equal(await page.textContent(`#board tr[data-product="${first.productId}"] th a`), `Trail runner 2 #${first.productId}`);
  await admin.updateCatalog({ products: [{ productId: first.productId, title: "" }] });
  await context.close();
});

test("the compare page shows what CompareRankings says of two boards", async () => {
  const yesterday = new Date(Date.now() - 24 * 3600 * 1000).toISOString().slice(0, 10);
  const { context, page } = await open(TOKENS.read, `#/compare?a-window=daily&b-window=daily&b-date=${yesterday}&depth=100&p=0.9`);
  await page.locator("#rbo").waitFor();
  const answer = await server.client(TOKENS.read).compareRankings({
    a: { window: Window.DAILY, limit: 100 },
    b: { window: Window.DAILY, date: yesterday, limit: 100 },
    persistence: 0.9,
  });
  assert.equal(Number(await page.getAttribute("#rbo", "data-value")), answer.rboExt);
  assert.equal(Number(await page.getAttribute("#tau", "data-value")), answer.weightedTau);
  assert.ok(answer.rboExt < 1, "today's board is not yesterday's");
  const shifts = await page.$$eval("#shifts tbody tr", (rows) => rows.map((r) => r.getAttribute("data-product")));
  const moved = answer.largestShifts.filter((s) => s.rankA !== s.rankB);
  assert.ok(moved.length > 0, "products moved between the days");
  assert.deepEqual(shifts, moved.map((s) => String(s.productId)));
  await page.locator('table[data-board="b"] tbody tr').first().waitFor();
  await page.screenshot({ path: join(SHOTS, "compare.png"), fullPage: true });
  await context.close();
});

test("two boards that are the same are said to be so, with no list of shifts", async () => {
  const { context, page } = await open(TOKENS.read, "#/compare?a-window=daily&b-window=daily&depth=100&p=0.9");
  await page.locator("#rbo").waitFor();
  const answer = await server.client(TOKENS.read).compareRankings({ a: { window: Window.DAILY, limit: 100 }, b: { window: Window.DAILY, limit: 100 }, persistence: 0.9 });
  assert.equal(answer.rboExt, 1, "a board is its own equal");
  assert.equal(await page.locator("#shifts tbody tr").count(), 0, "no product listed as shifted");
  assert.match((await page.textContent("#shifts")) ?? "", /No product moved/);
  await context.close();
});

test("a product with no kept history is said to have none, with no empty chart", async () => {
  // Ranked today only: no ended day kept it.
  const id = 90_001n;
  const events = Array.from({ length: 3 }, (_, i) => ({ eventId: `fresh-${i}`, productId: id, type: EventType.VIEW, occurredAt: timestampFromMs(Date.now() - 1000) }));
  await server.client(TOKENS.write).recordEvents({ events });
  await server.client(TOKENS.admin).recompute({});
  const past = await server.client(TOKENS.read).getRankHistory({ productId: id });
  assert.ok(past.days.every((d) => d.rank === 0n), "no ranked day kept");
  const { context, page } = await open(TOKENS.read, `#/product?id=${id}`);
  await page.locator("#history-empty").waitFor();
  assert.match((await page.textContent("#history-empty")) ?? "", /Not in the kept top of any of the last \d+ ended days|No ended day is kept yet/);
  assert.equal(await page.locator("svg.history-chart").count(), 0, "no chart frame drawn");
  await context.close();
});

test("the controls form offers every window a control may name, trending included", async () => {
  const admin = server.client(TOKENS.admin);
  const { context, page } = await open(TOKENS.admin);
  await page.getByRole("link", { name: "Controls" }).click();
  await page.locator("form.control-form").waitFor();
  await page.getByLabel("Id", { exact: true }).fill("console-trending");
  await page.locator("form.control-form select[name=kind]").selectOption("exclude");
  await page.getByLabel("Products", { exact: true }).fill("7");
  await page.locator('form.control-form input[name="trending"]').check();
  await page.getByRole("button", { name: "Save" }).click();
  await page.getByText(/Saved console-trending \(revision \d+\)/).waitFor();
  const stored = (await admin.listControls({})).controls.find((c) => c.controlId === "console-trending");
  assert.deepEqual(stored?.windows, [Window.TRENDING]);
  await page.locator('#controls tr[data-control="console-trending"]').waitFor();
  assert.equal(await page.textContent('#controls tr[data-control="console-trending"] td:nth-child(3)'), "whole ranking, trending");
  await eventually("product 7 leaves the trending board", async () => !(await admin.getTopN({ window: Window.TRENDING, limit: 1000 })).products.some((p) => p.productId === 7n));
  await admin.deleteControl({ controlId: "console-trending", expectedRevision: stored!.revision });
  await context.close();
});

test("the board reads the trending window as GetTopN serves it", async () => {
  const { context, page } = await open(TOKENS.read, "#/board?window=trending");
  const served = await server.client(TOKENS.read).getTopN({ window: Window.TRENDING, limit: 20 });
  assert.ok(served.products.length > 0, "a trending board");
  await page.locator("#board tbody tr[data-product]").nth(served.products.length - 1).waitFor();
  assert.deepEqual(
    (await boardRows(page)).map((r) => [r.id, r.score]),
    served.products.map((p) => [String(p.productId), String(p.score)]),
  );
  assert.equal(await page.locator('main select[name="window"]').first().inputValue(), "trending");
  await context.close();
});

test("the board and the compare page read a variant profile by name", async () => {
  const { context, page } = await open(TOKENS.read, "#/board?window=daily&profile=likes");
  await page.locator("#board tbody tr[data-product]").nth(19).waitFor();
  const served = await server.client(TOKENS.read).getTopN({ window: Window.DAILY, limit: 20, profile: "likes" });
  assert.equal(served.profile, "likes");
  assert.deepEqual(
    (await boardRows(page)).map((r) => [r.id, r.score]),
    served.products.map((p) => [String(p.productId), String(p.score)]),
  );
  const own = await server.client(TOKENS.read).getTopN({ window: Window.DAILY, limit: 20 });
  assert.notDeepEqual(own.products.map((p) => p.productId), served.products.map((p) => p.productId), "the profiles differ");

  await page.goto(`${server.url}/console/#/compare?a-window=daily&b-window=daily&b-profile=likes&depth=100&p=0.9`);
  await page.locator("#rbo").waitFor();
  const answer = await server.client(TOKENS.read).compareRankings({
    a: { window: Window.DAILY, limit: 100 },
    b: { window: Window.DAILY, limit: 100, profile: "likes" },
    persistence: 0.9,
  });
  assert.equal(Number(await page.getAttribute("#rbo", "data-value")), answer.rboExt);
  assert.equal(Number(await page.getAttribute("#tau", "data-value")), answer.weightedTau);
  assert.ok(answer.rboExt < 1, "the two profiles rank differently");
  await page.screenshot({ path: join(SHOTS, "compare-profiles.png"), fullPage: true });
  await context.close();
});

const PAGES = ["#/board", "#/product?id=150", "#/movers", "#/compare", "#/catalog", "#/controls"];

/** Waits until the page at `hash` has drawn what it reads. */
async function drawn(page: Page, hash: string): Promise<void> {
  // Everything a page draws from its calls, so that nothing is redrawn while it is read.
  const ready: Record<string, string[]> = {
    "#/board": ["#board tbody tr[data-product]"],
    "#/product?id=150": ["#main-score", "#best-rank"],
    "#/movers": ["#rising-title", "#falling-title"],
    "#/compare": ["#rbo", 'table[data-board="b"]'],
    "#/catalog": ["form.catalog"],
    "#/controls": ["#stored-title", 'table[data-board="organic"]', 'table[data-board="served"]'],
  };
  for (const selector of ready[hash]) await page.locator(selector).first().waitFor();
}

test("every control of every page is reached with the keyboard alone", async () => {
  const { context, page } = await open(TOKENS.admin);
  for (const hash of PAGES) {
    await page.goto(`${server.url}/console/${hash}`);
    await drawn(page, hash);
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    const controls = await page.$$eval("a[href], button:not([disabled]), input, select", (els) =>
      els.filter((e) => (e as HTMLElement).offsetParent !== null).map((e, i) => ((e as HTMLElement).dataset.k = String(i))),
    );
    const reached = new Set<string>();
    for (let i = 0; i < controls.length * 2 + 5 && reached.size < controls.length; i++) {
      await page.keyboard.press("Tab");
      const k = await page.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset.k);
      if (k !== undefined) reached.add(k);
    }
    assert.equal(reached.size, controls.length, `${hash}: every control is reached by Tab`);
  }
  await context.close();
});

test("axe-core reports no violation on any page", async () => {
  const { context, page } = await open(TOKENS.admin);
  for (const hash of PAGES) {
    await page.goto(`${server.url}/console/${hash}`);
    await drawn(page, hash);
    await page.evaluate(AXE);
    const violations = await page.evaluate(async () => {
      const result = await (window as unknown as { axe: { run: () => Promise<{ violations: { id: string; nodes: { target: string[] }[] }[] }> } }).axe.run();
      return result.violations.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
    });
    assert.deepEqual(violations, [], `${hash}: axe-core violations`);
  }
  await context.close();
});

test("at 360 px wide nothing overflows", async () => {
  const { context, page } = await open(TOKENS.admin, "#/board", 360);
  for (const hash of PAGES) {
    await page.goto(`${server.url}/console/${hash}`);
    await drawn(page, hash);
    const [scroll, width] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    assert.ok(scroll <= width, `${hash}: ${scroll} px wide in a ${width} px window`);
    await page.screenshot({ path: join(SHOTS, `${hash.slice(2).split("?")[0]}-360.png`), fullPage: true });
  }
  await context.close();
});
