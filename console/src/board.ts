// The board: a live top of a ranking, fed by WatchTopN, that moves as versions arrive; the
// pages after it are read with GetTopN's page tokens, from one version.

import { Code, ConnectError } from "@connectrpc/connect";
import type { RankedProduct } from "./gen/ranking/v1/ranking_pb";
import { Window } from "./gen/ranking/v1/ranking_pb";
import { api, isAborted, isUnauthenticated } from "./api";
import { age, clock, field, fill, h, num, statusLine } from "./dom";
import { choiceOf, paramsOf, selector, type Choice } from "./selector";
import { report, type Page } from "./page";
import { label, learnTitles } from "./names";
import { ControlKinds } from "./marks";

const SIZES = [20, 50, 100];

export const board: Page = ({ main, params, navigate, askToken }) => {
  const choice = choiceOf(params);
  const size = SIZES.includes(Number(params.get("size"))) ? Number(params.get("size")) : 20;
  const stop = new AbortController();
  const sizeSelect = h("select", { name: "size" }, SIZES.map((s) => h("option", { value: s, selected: s === size }, `${s}`)));
  const form = selector(choice, (c) => navigate("board", paramsOf(c, { size: sizeSelect.value })), {
    profiles: true,
    extra: [field("Rows", sizeSelect)],
  });
  const status = statusLine();
  const version = h("p", { class: "version", id: "board-version" });
  const table = h("table", { class: "ranking", id: "board" });
  const previous = h("button", { type: "button", disabled: true }, "Previous page");
  const next = h("button", { type: "button" }, "Next page");
  const pageLabel = h("span", { class: "page-label", "aria-live": "polite" }, "Page 1 (live)");
  fill(
    main,
    h("h1", {}, "Board"),
    form,
    version,
    status,
    table,
    h("div", { class: "pager" }, previous, pageLabel, next),
  );

  const change =
    choice.window === Window.HOURLY
      ? "the hour before"
      : choice.window === Window.WEEKLY
        ? "the week before"
        : choice.window === Window.TRENDING
          ? "yesterday's last trending board"
          : "yesterday";
  let live: { products: RankedProduct[]; version: bigint; total: bigint } | null = null;
  let before = new Map<bigint, bigint>();
  // Page 1 is live; page k > 1 comes from the token chain of one version.
  let page = 1;
  let tokens: string[] = [];
  const kinds = new ControlKinds();
  // Titles and control kinds read before a page is drawn, so it is drawn once, by name.
  const learn = (products: RankedProduct[], signal: AbortSignal) =>
    Promise.all([learnTitles(products.map((p) => p.productId), signal), kinds.learn(products, signal)]);

  const showVersion = () => {
    if (page > 1 || !live) return;
    fill(
      version,
      live.version > 0n
        ? [`Version ${clock(live.version)} · `, h("span", { class: "age" }, age(live.version)), ` · ${num(live.total)} ranked`]
        : `${num(live.total)} ranked`,
    );
  };
  const ticker = setInterval(showVersion, 1000);

  const draw = (products: RankedProduct[], moving: boolean) => {
    // A reader on a product link keeps it across a redraw (a WatchTopN update every few
    // seconds must not throw keyboard focus back to the page).
    const focused = table.contains(document.activeElement) ? document.activeElement?.closest("tr")?.dataset.product : undefined;
    const rows = products.map((p) => {
      const was = before.get(p.productId);
      const moved = moving && was !== undefined && was !== p.rank ? (was > p.rank ? "moved-up" : "moved-down") : moving && was === undefined && before.size > 0 ? "entered" : "";
      return h(
        "tr",
        { class: moved, "data-product": String(p.productId) },
        h("td", { class: "rank" }, num(p.rank)),
        h("td", { class: "change" }, changeOf(p, change)),
        h("th", { scope: "row" }, h("a", { href: `#/product?id=${p.productId}&${dateParams(choice)}` }, label(p.productId)), kinds.marks(p)),
        h("td", { class: "score", "data-score": String(p.score) }, num(p.score)),
      );
    });
    fill(
      table,
      h("caption", { class: "visually-hidden" }, "Ranked products, best first"),
      h(
        "thead",
        {},
        h("tr", {}, h("th", { scope: "col" }, "Rank"), h("th", { scope: "col" }, "Change"), h("th", { scope: "col" }, "Product"), h("th", { scope: "col" }, "Score")),
      ),
      h("tbody", {}, rows),
    );
    if (products.length === 0) table.append(h("tbody", {}, h("tr", {}, h("td", { colspan: 4 }, "Nothing is ranked here yet."))));
    before = new Map(products.map((p) => [p.productId, p.rank]));
    if (focused) table.querySelector<HTMLAnchorElement>(`tr[data-product="${focused}"] a`)?.focus();
  };

  const watch = async () => {
    let delay = 250;
    while (!stop.signal.aborted) {
      try {
        const stream = api.watchTopN(
          { window: choice.window, date: choice.date, segment: choice.segment, profile: choice.profile, limit: size },
          { signal: stop.signal, timeoutMs: 0 },
        );
        for await (const m of stream) {
          delay = 250;
          await learn(m.products, stop.signal);
          live = { products: m.products, version: m.version, total: m.total };
          fill(status);
          if (page === 1) {
            draw(m.products, true);
            // Navigation → first drawn board, for the console's benchmark.
            if (performance.getEntriesByName("board-drawn").length === 0) performance.mark("board-drawn");
            showVersion();
            next.disabled = m.total <= BigInt(m.products.length);
          }
        }
      } catch (error) {
        if (stop.signal.aborted || isAborted(error)) return;
        report(status, error, askToken);
        if (isUnauthenticated(error) || ConnectError.from(error).code === Code.InvalidArgument) return;
      }
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 5000);
    }
  };

  // The turn under way: a new one (a second click on Next) cancels it, so that only the
  // last one asked for draws; `wanted` is the page the clicks so far ask for.
  let turning = new AbortController();
  let wanted = 1;
  const turn = async (to: number) => {
    turning.abort();
    const mine = new AbortController();
    turning = mine;
    const signal = AbortSignal.any([mine.signal, stop.signal]);
    try {
      if (to === 1) {
        page = 1;
        wanted = 1;
        tokens = [];
        pageLabel.textContent = "Page 1 (live)";
        if (live) {
          before = new Map();
          draw(live.products, false);
          showVersion();
        }
      } else {
        // The token of page k is in the answer of page k-1; page 1's comes from a GetTopN
        // of the same ranking, which also pins the version the walk reads.
        while (tokens.length < to - 1) {
          const last = tokens[tokens.length - 1];
          const answer = last
            ? await api.getTopN({ pageToken: last, limit: size }, { signal })
            : await api.getTopN({ window: choice.window, date: choice.date, segment: choice.segment, profile: choice.profile, limit: size }, { signal });
          if (!answer.nextPageToken) break;
          tokens.push(answer.nextPageToken);
        }
        const answer = await api.getTopN({ pageToken: tokens[to - 2], limit: size }, { signal });
        await learn(answer.products, signal);
        if (signal.aborted) return;
        page = to;
        before = new Map();
        draw(answer.products, false);
        pageLabel.textContent = `Page ${to}`;
        fill(version, answer.version > 0n ? `Version ${clock(answer.version)} (held while paging) · ${num(answer.total)} ranked` : `${num(answer.total)} ranked`);
        next.disabled = !answer.nextPageToken;
        if (answer.nextPageToken) tokens[to - 1] = answer.nextPageToken;
      }
      previous.disabled = page === 1;
      fill(status);
    } catch (error) {
      if (signal.aborted || isAborted(error)) return;
      wanted = page;
      const gone = ConnectError.from(error).code === Code.FailedPrecondition;
      report(status, error, askToken, gone ? "That version is no longer kept: back to the live page." : undefined);
      if (gone) void turn(1);
    }
  };
  previous.addEventListener("click", () => void turn((wanted = Math.max(1, wanted - 1))));
  next.addEventListener("click", () => void turn((wanted += 1)));

  void watch();
  return () => {
    stop.abort();
    turning.abort();
    clearInterval(ticker);
  };
};

/** The rank change as an arrow and its words. */
function changeOf(p: RankedProduct, since: string): HTMLElement {
  if (p.previousRank === 0n) return h("span", { class: "new", title: `Not ranked ${since}` }, "new");
  if (p.rankChange > 0n) return h("span", { class: "up", "aria-label": `up ${p.rankChange} since ${since}` }, `▲ ${p.rankChange}`);
  if (p.rankChange < 0n) return h("span", { class: "down", "aria-label": `down ${-p.rankChange} since ${since}` }, `▼ ${-p.rankChange}`);
  return h("span", { class: "same", "aria-label": `unchanged since ${since}` }, "–");
}

function dateParams(choice: Choice): string {
  const p = new URLSearchParams();
  if (choice.date) p.set("date", choice.date);
  if (choice.segment) p.set("segment", choice.segment);
  return p.toString();
}
