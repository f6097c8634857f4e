// Movers: the products that climbed and fell most since the previous period, within a top.

import { MoverDirection, type RankedProduct } from "./gen/ranking/v1/ranking_pb";
import { api } from "./api";
import { field, fill, h, num, statusLine } from "./dom";
import { choiceOf, paramsOf, selector } from "./selector";
import { report, type Page } from "./page";
import { label, learnTitles } from "./names";

export const movers: Page = ({ main, params, navigate, askToken }) => {
  const choice = choiceOf(params);
  const within = Math.max(0, Math.min(1_000_000, Number(params.get("within") ?? "100") || 0));
  const withinInput = h("input", { type: "number", name: "within", min: 0, value: within, inputmode: "numeric" });
  const form = selector(choice, (c) => navigate("movers", paramsOf(c, { within: withinInput.value })), {
    extra: [field("Within the top (0: all)", withinInput)],
  });
  const status = statusLine();
  const rising = h("section", { "aria-labelledby": "rising-title", class: "half" });
  const falling = h("section", { "aria-labelledby": "falling-title", class: "half" });
  fill(main, h("h1", {}, "Movers"), form, status, h("div", { class: "halves" }, rising, falling));
  const stop = new AbortController();

  const list = async (direction: MoverDirection, section: HTMLElement, title: string, id: string) => {
    const answer = await api.listMovers(
      { window: choice.window, date: choice.date, segment: choice.segment, direction, limit: 20, withinTop: BigInt(within) },
      { signal: stop.signal },
    );
    await learnTitles(answer.products.map((p) => p.productId), stop.signal);
    fill(
      section,
      h("h2", { id }, title),
      answer.products.length === 0
        ? h("p", {}, "No product moved.")
        : h(
            "table",
            { class: "ranking" },
            h("thead", {}, h("tr", {}, ["Rank", "Before", "Move", "Product"].map((t) => h("th", { scope: "col" }, t)))),
            h("tbody", {}, answer.products.map((p) => row(p))),
          ),
    );
  };
  void Promise.all([
    list(MoverDirection.RISING, rising, "Rising", "rising-title"),
    list(MoverDirection.FALLING, falling, "Falling", "falling-title"),
  ]).catch((error) => {
    if (!stop.signal.aborted) report(status, error, askToken);
  });
  return () => stop.abort();
};

function row(p: RankedProduct): HTMLElement {
  const up = p.rankChange > 0n;
  return h(
    "tr",
    {},
    h("td", {}, num(p.rank)),
    h("td", {}, num(p.previousRank)),
    h("td", { class: up ? "up" : "down" }, `${up ? "▲" : "▼"} ${num(up ? p.rankChange : -p.rankChange)}`),
    h("th", { scope: "row" }, h("a", { href: `#/product?id=${p.productId}` }, label(p.productId))),
  );
}
