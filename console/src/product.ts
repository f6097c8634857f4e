// A product: where it ranks (rank, tied rank, top %, neighbours) and why (ExplainRank drawn:
// each signal's points and the carry-over as parts of the main score, each tie-break axis
// against the day's population, the points still needed to pass the entry above).

import type { AxisExplanation, ExplainRankResponse, GetRankResponse, RankedProduct } from "./gen/ranking/v1/ranking_pb";
import { Window } from "./gen/ranking/v1/ranking_pb";
import { api, describe, isNotFound } from "./api";
import { field, fill, h, num, say, statusLine } from "./dom";
import { choiceOf, paramsOf, selector } from "./selector";
import { report, type Page } from "./page";
import { label, learnTitles } from "./names";
import { kindOf } from "./marks";
import { drawHistory } from "./history";

/** Colours of the score's parts, in order; chosen to stay apart for colour-blind readers. */
const PALETTE = ["#1f5fa8", "#b35900", "#2e7d32", "#7b3fa0", "#00838f", "#8d6e00", "#ad1457"];

export const product: Page = ({ main, params, navigate, askToken }) => {
  const choice = { ...choiceOf(params), window: Window.DAILY };
  const idText = params.get("id") ?? "";
  const id = h("input", { type: "text", inputmode: "numeric", name: "id", value: idText, required: true, pattern: "-?[0-9]{1,19}", autocomplete: "off" });
  const form = selector(choice, (c) => navigate("product", paramsOf(c, { id: id.value.trim() })), {
    windows: false,
    lead: [field("Product", id)],
    label: "Product",
  });
  const status = statusLine();
  const position = h("section", { "aria-labelledby": "position-title", id: "position" });
  const score = h("section", { "aria-labelledby": "score-title", id: "score" });
  const axes = h("section", { "aria-labelledby": "axes-title", id: "axes" });
  const past = h("section", { "aria-labelledby": "history-title", id: "history" });
  const title = h("h1", {}, idText ? `Product ${idText}` : "Product");
  fill(main, title, form, status, position, past, score, axes);
  if (!idText) {
    say(status, "Enter a product id.", "info");
    return () => {};
  }
  let productId: bigint;
  try {
    productId = BigInt(idText);
  } catch {
    say(status, "A product id is a whole number.");
    return () => {};
  }
  const stop = new AbortController();

  // The last 90 ended days of the same board, drawn when they come (a page without them
  // still shows the rest).
  void api
    .getRankHistory({ productId, segment: choice.segment, window: Window.DAILY }, { signal: stop.signal })
    .then((answer) => drawHistory(past, answer))
    .catch((error) => {
      if (!stop.signal.aborted) fill(past, h("h2", { id: "history-title" }, "History"), h("p", {}, `No history: ${describe(error)}`));
    });

  void (async () => {
    try {
      const [rank, explained] = await Promise.all([
        api.getRank({ productId, window: Window.DAILY, date: choice.date, segment: choice.segment, neighbors: 3 }, { signal: stop.signal }),
        api.explainRank({ productId, date: choice.date, segment: choice.segment }, { signal: stop.signal }),
      ]);
      await learnTitles([productId, ...rank.above.map((e) => e.productId), ...rank.below.map((e) => e.productId)], stop.signal);
      fill(title, label(productId));
      drawPosition(position, rank, explained, choice.segment);
      drawScore(score, explained);
      drawAxes(axes, explained.axes);
    } catch (error) {
      if (stop.signal.aborted) return;
      const notRanked = `Product ${idText} is not ranked ${choice.date ? `on ${choice.date}` : "today"}${choice.segment ? ` in ${choice.segment}` : ""}.`;
      if (isNotFound(error)) report(status, error, askToken, notRanked, "info");
      else report(status, error, askToken);
    }
  })();
  return () => stop.abort();
};

function drawPosition(section: HTMLElement, answer: GetRankResponse, explained: ExplainRankResponse, segment: string): void {
  const p = answer.product!;
  const row = (e: RankedProduct, self: boolean) =>
    h(
      "tr",
      { class: self ? "self" : "", "aria-current": self ? "true" : null },
      h("td", {}, num(e.rank)),
      h("th", { scope: "row" }, self ? label(e.productId) : h("a", { href: `#/product?id=${e.productId}` }, label(e.productId))),
      h("td", { class: "score" }, num(e.score)),
    );
  fill(
    section,
    h("h2", { id: "position-title" }, "Position"),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Rank"),
      h("dd", { id: "rank" }, `${num(p.rank)} of ${num(answer.total)}${segment ? ` in ${segment}` : ""}`),
      h("dt", {}, "Tied rank"),
      h("dd", {}, num(p.tiedRank)),
      h("dt", {}, "Top"),
      h("dd", {}, `${p.topPercent.toFixed(2)} %`),
      h("dt", {}, "Yesterday"),
      h("dd", {}, p.previousRank === 0n ? "not ranked" : `rank ${num(p.previousRank)}`),
      explained.controls.length > 0 ? [h("dt", {}, "Without controls"), h("dd", { id: "organic-rank" }, explained.organicRank === 0n ? "not ranked" : `rank ${num(explained.organicRank)}`)] : null,
      explained.controls.length > 0
        ? [h("dt", {}, "Controls"), h("dd", { id: "acting-controls" }, explained.controls.map((c) => `${c.controlId} (${kindOf(c)})`).join(", "))]
        : null,
    ),
    h(
      "table",
      { class: "ranking neighbours" },
      h("caption", {}, "Neighbours"),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Rank"), h("th", { scope: "col" }, "Product"), h("th", { scope: "col" }, "Score"))),
      h("tbody", {}, answer.above.map((e) => row(e, false)), row(p, true), answer.below.map((e) => row(e, false))),
    ),
  );
}

/** The main score as a bar of its parts, and the same parts as a table. */
function drawScore(section: HTMLElement, e: ExplainRankResponse): void {
  const parts: { name: string; value: string; points: number }[] = e.signals
    .filter((s) => s.points !== 0)
    .map((s) => ({
      name: s.signal,
      value: s.perActor > 0 ? `${num(s.value)} (of ${num(s.events)} events, ${num(s.overCap)} over the cap of ${s.perActor})` : num(s.value),
      points: s.points,
    }));
  if (e.carryPoints !== 0) parts.push({ name: "carry-over", value: "from yesterday", points: e.carryPoints });
  const total = parts.reduce((sum, p) => sum + Math.max(0, p.points), 0);
  const bar = h(
    "div",
    { class: "parts-bar", role: "img", "aria-label": `Main score ${num(e.mainScore)}: ${parts.map((p) => `${p.name} ${num(p.points)}`).join(", ")}` },
    parts.map((p, i) =>
      h("span", {
        class: "part",
        style: `width:${total > 0 ? (100 * Math.max(0, p.points)) / total : 0}%;background:${PALETTE[i % PALETTE.length]}`,
        title: `${p.name}: ${num(p.points)}`,
      }),
    ),
  );
  fill(
    section,
    h("h2", { id: "score-title" }, "Score"),
    e.stale ? h("p", { class: "note", role: "note" }, "Events arrived after this version was computed: these are the current counts, which the next recompute will serve; they differ from the served score.") : null,
    bar,
    h(
      "table",
      { class: "parts" },
      h("caption", { class: "visually-hidden" }, "Parts of the main score"),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Part"), h("th", { scope: "col" }, "Value"), h("th", { scope: "col" }, "Points"))),
      h(
        "tbody",
        {},
        parts.map((p, i) =>
          h(
            "tr",
            { class: "part-row", "data-points": String(p.points) },
            h("th", { scope: "row" }, h("span", { class: "swatch", style: `background:${PALETTE[i % PALETTE.length]}` }), p.name),
            h("td", {}, p.value),
            h("td", { class: "score" }, num(p.points)),
          ),
        ),
      ),
      h("tfoot", {}, h("tr", {}, h("th", { scope: "row" }, "Main score"), h("td", {}), h("td", { class: "score", id: "main-score", "data-main": String(e.mainScore) }, num(e.mainScore)))),
    ),
    e.above
      ? h("p", { id: "overtake" }, `${num(e.pointsToOvertake)} more points pass rank ${num(e.above.rank)} (`, h("a", { href: `#/product?id=${e.above.productId}` }, `product ${e.above.productId}`), ").")
      : h("p", { id: "overtake" }, "Ranked first: nothing to overtake."),
    retracted(e),
  );
}

function retracted(e: ExplainRankResponse): HTMLElement | null {
  const any = e.retractedViews + e.retractedLikes + e.retractedOrders > 0n;
  if (!any) return null;
  return h("p", {}, `Retracted that day: ${num(e.retractedViews)} views, ${num(e.retractedLikes)} likes, ${num(e.retractedOrders)} orders (${num(e.retractedOrderAmount)} in amount).`);
}

/** Each tie-break axis: the product's value against the population's mean and spread. */
function drawAxes(section: HTMLElement, axes: AxisExplanation[]): void {
  fill(
    section,
    h("h2", { id: "axes-title" }, "Tie-breaks"),
    h("p", {}, "Between equal main scores, each axis in turn orders the products: its norm (0–999) places the product's value among the day's population."),
    h(
      "table",
      { class: "axes" },
      h("caption", { class: "visually-hidden" }, "Tie-break axes, most significant first"),
      h(
        "thead",
        {},
        h("tr", {}, ["Axis", "Value", "Mean", "Std", "z", "Norm", "Against the population"].map((t) => h("th", { scope: "col" }, t))),
      ),
      h(
        "tbody",
        {},
        axes.map((a) =>
          h(
            "tr",
            { "data-axis": a.axis, "data-norm": String(a.norm) },
            h("th", { scope: "row" }, a.axis),
            h("td", { class: "num" }, num(a.raw)),
            h("td", { class: "num" }, num(a.mean)),
            h("td", { class: "num" }, num(a.std)),
            h("td", { class: "num" }, a.z.toFixed(2)),
            h("td", { class: "norm" }, String(a.norm)),
            h("td", {}, zBar(a)),
          ),
        ),
      ),
    ),
  );
}

/** A line from z = -3 to +3 with the mean in the middle and the product marked. */
function zBar(a: AxisExplanation): HTMLElement {
  const z = Math.max(-3, Math.min(3, a.z));
  const at = ((z + 3) / 6) * 100;
  return h(
    "span",
    { class: "zbar", role: "img", "aria-label": `z ${a.z.toFixed(2)}: ${a.z >= 0 ? "above" : "below"} the mean` },
    h("span", { class: "zmean" }),
    h("span", { class: "zmark", style: `left:calc(${at}% - 4px)` }),
  );
}
