// A board organic and served side by side at a chosen time, as PreviewTopN derives them from
// its current version: the organic one with no control, the served one with the stored
// controls active then (and a draft from the form, when one is previewed).

import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { type ControlSchema, type RankedProduct, Window } from "./gen/ranking/v1/ranking_pb";
import { api } from "./api";
import { field, fill, h, num, statusLine } from "./dom";
import { ControlKinds, kindOf } from "./marks";
import { label, learnTitles } from "./names";
import { report } from "./page";

type Draft = MessageInitShape<typeof ControlSchema>;

export function boardsAt(askToken: () => void) {
  const window = h("select", { name: "window" }, h("option", { value: "daily" }, "Daily"), h("option", { value: "weekly" }, "Weekly (7 days)"));
  const segment = h("input", { type: "text", name: "segment", placeholder: "whole ranking", pattern: "[a-z0-9][a-z0-9_.:\\-]{0,63}", autocomplete: "off" });
  const at = h("input", { type: "datetime-local", name: "at", title: "Empty: now" });
  const rows = h("input", { type: "number", name: "rows", min: 1, max: 100, value: 20 });
  const status = statusLine();
  const organic = h("section", { class: "half", "aria-labelledby": "organic-title" });
  const served = h("section", { class: "half", "aria-labelledby": "served-title" });
  const form = h(
    "form",
    { class: "controls", "aria-label": "Board at a time" },
    field("Window", window),
    field("Segment", segment),
    field("At (empty: now)", at),
    field("Rows", rows),
    h("button", { type: "submit" }, "Show"),
  );
  const section = h(
    "section",
    { "aria-labelledby": "at-title", id: "boards-at" },
    h("h2", { id: "at-title" }, "The board at a time"),
    form,
    status,
    h("div", { class: "halves" }, organic, served),
  );
  const kinds = new ControlKinds();
  let draft: Draft | null = null;
  let asking = new AbortController();

  const show = async () => {
    asking.abort();
    const mine = new AbortController();
    asking = mine;
    const selector = {
      window: window.value === "weekly" ? Window.WEEKLY : Window.DAILY,
      segment: segment.value.trim(),
      limit: Math.max(1, Math.min(100, Number(rows.value) || 20)),
    };
    const when = at.value ? timestampFromMs(new Date(at.value).getTime()) : undefined;
    try {
      const [plain, under] = await Promise.all([
        api.previewTopN({ selector, at: when, organic: true }, { signal: mine.signal }),
        api.previewTopN({ selector, at: when, drafts: draft ? [draft] : [] }, { signal: mine.signal }),
      ]);
      if (draft) kinds.teach(draft.controlId ?? "", kindOf(draft));
      await Promise.all([learnTitles([...plain.products, ...under.products].map((p) => p.productId), mine.signal), kinds.learn(under.products, mine.signal)]);
      if (mine.signal.aborted) return;
      fill(status);
      drawBoard(organic, "organic-title", "Organic", plain.products, null);
      drawBoard(served, "served-title", draft ? `Served, with the draft ${draft.controlId}` : "Served", under.products, kinds);
    } catch (error) {
      if (!mine.signal.aborted) report(status, error, askToken);
    }
  };

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    draft = null;
    void show();
  });

  return {
    section,
    /** Draws the boards again (after a put or a delete), with no draft. */
    refresh: () => {
      draft = null;
      void show();
    },
    /** Draws the served board as if `d` were put, on the draft's board. */
    show: (d: Draft) => {
      draft = d;
      segment.value = d.segment ?? "";
      void show().then(() => section.scrollIntoView({ block: "start" }));
    },
  };
}

function drawBoard(section: HTMLElement, id: string, title: string, products: RankedProduct[], kinds: ControlKinds | null): void {
  fill(
    section,
    h("h3", { id }, title),
    h(
      "table",
      { class: "ranking", "data-board": kinds ? "served" : "organic" },
      h("thead", {}, h("tr", {}, ["Rank", "Product", "Score"].map((t) => h("th", { scope: "col" }, t)))),
      h(
        "tbody",
        {},
        products.map((p) =>
          h(
            "tr",
            { "data-product": String(p.productId) },
            h("td", { class: "rank" }, num(p.rank)),
            h("th", { scope: "row" }, h("a", { href: `#/product?id=${p.productId}` }, label(p.productId)), kinds?.marks(p) ?? []),
            h("td", { class: "score", "data-score": String(p.score) }, num(p.score)),
          ),
        ),
      ),
    ),
  );
}
