// Compare: two boards (any window, date, segment) side by side, and what CompareRankings says
// of them: rank-biased overlap and its lower bound, weighted tau, the overlap of the top 10
// and 100, and the products whose ranks differ most.

import type { CompareRankingsResponse, GetTopNResponse } from "./gen/ranking/v1/ranking_pb";
import { Window } from "./gen/ranking/v1/ranking_pb";
import { api } from "./api";
import { field, fill, h, num, statusLine } from "./dom";
import { label, learnTitles } from "./names";
import { choiceOf, type Choice } from "./selector";
import { report, type Page } from "./page";

const WINDOWS: [string, Window][] = [
  ["daily", Window.DAILY],
  ["weekly", Window.WEEKLY],
];

/** The controls of one board, named `a` or `b` in the address. */
function boardFields(name: string, choice: Choice) {
  const window = h(
    "select",
    { name: `${name}-window` },
    WINDOWS.map(([w, value]) => h("option", { value: w, selected: value === choice.window }, w === "daily" ? "Daily" : "Weekly")),
  );
  const date = h("input", { type: "date", name: `${name}-date`, value: choice.date });
  const segment = h("input", { type: "text", name: `${name}-segment`, value: choice.segment, placeholder: "whole ranking", autocomplete: "off" });
  const profile = h("input", { type: "text", name: `${name}-profile`, value: choice.profile ?? "", placeholder: "default", autocomplete: "off" });
  const read = (): Choice => ({
    window: window.value === "weekly" ? Window.WEEKLY : Window.DAILY,
    date: date.value,
    segment: segment.value.trim(),
    profile: profile.value.trim(),
  });
  return { fields: [field(`Board ${name.toUpperCase()}: window`, window), field("date", date), field("segment", segment), field("profile", profile)], read };
}

function of(params: URLSearchParams, name: string): Choice {
  const p = new URLSearchParams();
  for (const k of ["window", "date", "segment", "profile"]) {
    const v = params.get(`${name}-${k}`);
    if (v) p.set(k, v);
  }
  return choiceOf(p);
}

export const compare: Page = ({ main, params, navigate, askToken }) => {
  const a = boardFields("a", of(params, "a"));
  const b = boardFields("b", of(params, "b"));
  const depth = h("input", { type: "number", name: "depth", min: 1, max: 1000, value: params.get("depth") ?? "100" });
  const persistence = h("input", { type: "number", name: "p", min: 0.01, max: 0.99, step: 0.01, value: params.get("p") ?? "0.9" });
  const form = h(
    "form",
    { class: "controls", "aria-label": "Boards compared" },
    h("div", { class: "controls" }, a.fields),
    h("div", { class: "controls" }, b.fields),
    field("Depth", depth),
    field("Persistence p", persistence),
    h("button", { type: "submit" }, "Compare"),
  );
  const status = statusLine();
  const figures = h("section", { "aria-labelledby": "figures-title", id: "figures" });
  const sides = h("div", { class: "halves" });
  fill(main, h("h1", {}, "Compare"), form, status, figures, sides);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = new URLSearchParams({ depth: depth.value, p: persistence.value });
    for (const [name, side] of [["a", a], ["b", b]] as const) {
      const c = side.read();
      next.set(`${name}-window`, c.window === Window.WEEKLY ? "weekly" : "daily");
      if (c.date) next.set(`${name}-date`, c.date);
      if (c.segment) next.set(`${name}-segment`, c.segment);
      if (c.profile) next.set(`${name}-profile`, c.profile);
    }
    navigate("compare", next);
  });
  const stop = new AbortController();
  void (async () => {
    const limit = Math.max(1, Math.min(1000, Number(depth.value) || 100));
    const selector = (c: Choice) => ({ window: c.window, date: c.date, segment: c.segment, profile: c.profile, limit });
    const [ca, cb] = [a.read(), b.read()];
    try {
      const [answer, topA, topB] = await Promise.all([
        api.compareRankings({ a: selector(ca), b: selector(cb), persistence: Number(persistence.value) || 0 }, { signal: stop.signal }),
        api.getTopN({ ...selector(ca), limit: Math.min(limit, 20) }, { signal: stop.signal }),
        api.getTopN({ ...selector(cb), limit: Math.min(limit, 20) }, { signal: stop.signal }),
      ]);
      await learnTitles([...topA.products, ...topB.products, ...answer.largestShifts].map((p) => p.productId), stop.signal);
      drawFigures(figures, answer);
      fill(sides, drawTop("a", "Board A", topA), drawTop("b", "Board B", topB));
    } catch (error) {
      if (!stop.signal.aborted) report(status, error, askToken);
    }
  })();
  return () => stop.abort();
};

function drawFigures(section: HTMLElement, c: CompareRankingsResponse): void {
  const fixed = (v: number) => v.toFixed(4);
  // A product in the same place on both boards did not shift, whatever the list holds.
  const moved = c.largestShifts.filter((s) => s.rankA !== s.rankB);
  fill(
    section,
    h("h2", { id: "figures-title" }, "How alike"),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Rank-biased overlap"),
      h("dd", { id: "rbo", "data-value": String(c.rboExt) }, `${fixed(c.rboExt)} (at least ${fixed(c.rboMin)})`),
      h("dt", {}, "Weighted tau"),
      h("dd", { id: "tau", "data-value": String(c.weightedTau) }, fixed(c.weightedTau)),
      h("dt", {}, "Overlap of the top 10 / 100"),
      h("dd", {}, `${fixed(c.overlapAt10)} / ${fixed(c.overlapAt100)}`),
    ),
    moved.length === 0
      ? h("p", { id: "shifts" }, "No product moved: both boards rank their products in the same places.")
      : h(
          "table",
          { class: "ranking", id: "shifts" },
          h("caption", {}, "Largest shifts"),
          h("thead", {}, h("tr", {}, ["Product", "Rank in A", "Rank in B"].map((t) => h("th", { scope: "col" }, t)))),
          h(
            "tbody",
            {},
            moved.map((s) =>
              h(
                "tr",
                { "data-product": String(s.productId) },
                h("th", { scope: "row" }, h("a", { href: `#/product?id=${s.productId}` }, label(s.productId))),
                h("td", { class: "rank" }, s.rankA === 0n ? "–" : num(s.rankA)),
                h("td", { class: "rank" }, s.rankB === 0n ? "–" : num(s.rankB)),
              ),
            ),
          ),
        ),
  );
}

function drawTop(id: string, title: string, top: GetTopNResponse): HTMLElement {
  return h(
    "section",
    { class: "half", "aria-labelledby": `top-${id}` },
    h("h2", { id: `top-${id}` }, `${title}: ${top.date}`),
    h(
      "table",
      { class: "ranking", "data-board": id },
      h("thead", {}, h("tr", {}, ["Rank", "Product", "Score"].map((t) => h("th", { scope: "col" }, t)))),
      h(
        "tbody",
        {},
        top.products.map((p) =>
          h(
            "tr",
            { "data-product": String(p.productId) },
            h("td", { class: "rank" }, num(p.rank)),
            h("th", { scope: "row" }, h("a", { href: `#/product?id=${p.productId}` }, label(p.productId))),
            h("td", { class: "score" }, num(p.score)),
          ),
        ),
      ),
    ),
  );
}
