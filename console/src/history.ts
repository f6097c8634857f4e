// A product's last 90 ended days (GetRankHistory): its served rank each day as a line (best
// at the top, on a log scale so rank 3 and rank 300 both read), the days it was not in the
// kept top as gaps, and the best rank, days in the top 10 and 100 and the streak as facts.

import type { GetRankHistoryResponse } from "./gen/ranking/v1/ranking_pb";
import { fill, h, num } from "./dom";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 900;
const HEIGHT = 180;
const PAD = 28;

function svg(tag: string, attrs: Record<string, string | number>): SVGElement {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/** Draws `answer` into `section`. */
export function drawHistory(section: HTMLElement, answer: GetRankHistoryResponse): void {
  const days = answer.days;
  const ranked = days.filter((d) => d.rank > 0n);
  const worst = ranked.reduce((m, d) => (d.rank > m ? d.rank : m), 1n);
  const span = Math.log10(Number(worst)) || 1;
  const x = (i: number) => PAD + (i * (WIDTH - 2 * PAD)) / Math.max(1, days.length - 1);
  const y = (rank: bigint) => PAD + ((HEIGHT - 2 * PAD) * Math.log10(Number(rank))) / span;

  const chart = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    class: "history-chart",
    role: "img",
    "aria-label": ranked.length
      ? `Ranked on ${ranked.length} of ${days.length} days, best ${answer.bestRank} on ${answer.bestRankDate}`
      : `Not in the kept top on any of the last ${days.length} days`,
  });
  chart.append(svg("line", { x1: PAD, x2: WIDTH - PAD, y1: PAD, y2: PAD, class: "axis" }));
  const top = svg("text", { x: 2, y: PAD + 4, class: "tick" });
  top.textContent = "1";
  const bottom = svg("text", { x: 2, y: HEIGHT - PAD + 4, class: "tick" });
  bottom.textContent = String(worst);
  chart.append(top, bottom);
  // One polyline per run of ranked days: a day out of the kept top breaks the line.
  let run: string[] = [];
  const flush = () => {
    if (run.length > 1) chart.append(svg("polyline", { points: run.join(" "), class: "rank-line" }));
    run = [];
  };
  days.forEach((d, i) => {
    if (d.rank === 0n) return flush();
    run.push(`${x(i)},${y(d.rank)}`);
    const dot = svg("circle", { cx: x(i), cy: y(d.rank), r: 3, class: "rank-dot", "data-date": d.date, "data-rank": String(d.rank) });
    const title = svg("title", {});
    title.textContent = `${d.date}: rank ${d.rank}`;
    dot.append(title);
    chart.append(dot);
  });
  flush();

  // No ranked day: a chart would be an empty frame from 1 to 1; words say it.
  const drawn: Node =
    ranked.length === 0
      ? h(
          "p",
          { id: "history-empty" },
          days.length ? `Not in the kept top of any of the last ${days.length} ended days: no rank to draw.` : "No ended day is kept yet: no rank to draw.",
        )
      : chart;
  fill(
    section,
    h("h2", { id: "history-title" }, `Last ${days.length} days`),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Best rank"),
      h("dd", { id: "best-rank" }, answer.bestRank === 0n ? "never in the kept top" : `${num(answer.bestRank)} on ${answer.bestRankDate}`),
      h("dt", {}, "Days in the top 10 / 100"),
      h("dd", {}, `${answer.daysInTop10} / ${answer.daysInTop100}`),
      h("dt", {}, "Streak in the top 100"),
      h("dd", {}, `${answer.streakInTop100} ${answer.streakInTop100 === 1 ? "day" : "days"}`),
      answer.restatedDays > 0 ? [h("dt", {}, "Restated"), h("dd", {}, `${answer.restatedDays} days changed after they ended`)] : null,
    ),
    drawn,
  );
}
