// Merchandising controls (admin token): the stored controls, a form for each kind with its
// schedule, and the board organic and served side by side at a chosen time (PreviewTopN),
// with the form's draft or without it. Saving and deleting send the revision read, so a
// control someone else changed meanwhile is refused, not overwritten.

import { timestampDate, timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { type Control, type ControlSchema, Window } from "./gen/ranking/v1/ranking_pb";
import { api } from "./api";
import { field, fill, h, say, statusLine } from "./dom";
import { kindOf } from "./marks";
import { label, learnTitles } from "./names";
import { boardsAt } from "./boards-at";
import { windowName } from "./selector";
import { report, type Page } from "./page";

type Draft = MessageInitShape<typeof ControlSchema>;

export const controls: Page = ({ main, askToken }) => {
  const status = statusLine();
  const list = h("section", { "aria-labelledby": "stored-title" });
  const editor = controlForm();
  const side = boardsAt(askToken);
  fill(
    main,
    h("h1", {}, "Controls"),
    h("p", {}, "A control pins a product at a position, boosts or buries products by points, or takes products off one board, from a start time to an end time. The board is served again within a second of a change or of a control's start or end."),
    status,
    list,
    editor.form,
    side.section,
  );
  const stop = new AbortController();
  // The control being edited, as read: saving it expects its revision.
  let editing: Control | null = null;

  const load = async () => {
    try {
      const answer = await api.listControls({}, { signal: stop.signal });
      await learnTitles(answer.controls.flatMap(productsOf), stop.signal);
      drawList(answer.controls);
    } catch (error) {
      if (!stop.signal.aborted) report(status, error, askToken);
    }
  };

  const drawList = (stored: Control[]) => {
    const rows = stored.map((c) =>
      h(
        "tr",
        { "data-control": c.controlId },
        h("th", { scope: "row" }, c.controlId),
        h("td", {}, h("span", { class: `mark ${kindOf(c)}` }, kindOf(c)), " ", actionWords(c)),
        h("td", {}, boardWords(c)),
        h("td", {}, scheduleWords(c)),
        h("td", {}, c.note),
        h(
          "td",
          { class: "actions" },
          h("button", { type: "button", class: "link", "aria-label": `Edit ${c.controlId}`, onclick: () => edit(c) }, "Edit"),
          h("button", { type: "button", class: "link", "aria-label": `Delete ${c.controlId}`, onclick: () => void remove(c) }, "Delete"),
        ),
      ),
    );
    fill(
      list,
      h("h2", { id: "stored-title" }, "Stored controls"),
      stored.length === 0
        ? h("p", {}, "No control is stored.")
        : h(
            "table",
            { class: "ranking", id: "controls" },
            h("thead", {}, h("tr", {}, ["Id", "Action", "Board", "When", "Note", "Change"].map((t) => h("th", { scope: "col" }, t)))),
            h("tbody", {}, rows),
          ),
    );
  };

  const edit = (c: Control) => {
    editing = c;
    editor.show(c);
    say(status, `Editing ${c.controlId} (revision ${c.revision}).`, "info");
    editor.focus();
  };

  const remove = async (c: Control) => {
    try {
      const answer = await api.deleteControl({ controlId: c.controlId, expectedRevision: c.revision });
      say(status, answer.deleted ? `Deleted ${c.controlId}.` : `${c.controlId} was already gone.`, "info");
      if (editing?.controlId === c.controlId) editing = null;
      await load();
      side.refresh();
    } catch (error) {
      report(status, error, askToken);
    }
  };

  editor.form.addEventListener("submit", (event) => {
    event.preventDefault();
    const draft = editor.draft();
    if (typeof draft === "string") return say(status, draft);
    const read = editing;
    const expected = read && read.controlId === draft.controlId ? read.revision : 0n;
    void api
      .putControl({ control: draft, expectedRevision: expected })
      .then(async (answer) => {
        editing = null;
        say(status, `Saved ${answer.control!.controlId} (revision ${answer.control!.revision}).`, "info");
        await load();
        side.refresh();
      })
      .catch((error) => report(status, error, askToken));
  });
  editor.onPreview((draft) => side.show(draft));

  void load();
  side.refresh();
  return () => stop.abort();
};

/** The form of one control: its id, kind, the kind's fields, its board and schedule. */
function controlForm() {
  const id = h("input", { type: "text", name: "control-id", required: true, pattern: "[a-z0-9][a-z0-9_.\\-]{0,63}", autocomplete: "off", title: "Lowercase letters, digits, _ . -; at most 64" });
  const kind = h(
    "select",
    { name: "kind" },
    h("option", { value: "pin" }, "Pin a product"),
    h("option", { value: "boost" }, "Boost or bury products"),
    h("option", { value: "exclude" }, "Exclude products"),
  );
  const product = h("input", { type: "text", name: "product", inputmode: "numeric", pattern: "-?[0-9]{1,19}", autocomplete: "off" });
  const position = h("input", { type: "number", name: "position", min: 1, max: 1000, value: 1 });
  const products = h("input", { type: "text", name: "products", placeholder: "12, 40, 77", autocomplete: "off" });
  const points = h("input", { type: "number", name: "points", step: "any", value: 10, title: "Negative points bury" });
  const segment = h("input", { type: "text", name: "segment", placeholder: "whole ranking", pattern: "[a-z0-9][a-z0-9_.:\\-]{0,63}", autocomplete: "off" });
  const daily = h("input", { type: "checkbox", name: "daily" });
  const weekly = h("input", { type: "checkbox", name: "weekly" });
  const trending = h("input", { type: "checkbox", name: "trending" });
  const from = h("input", { type: "datetime-local", name: "from" });
  const until = h("input", { type: "datetime-local", name: "until" });
  const note = h("input", { type: "text", name: "note", maxlength: 256, autocomplete: "off" });
  const pinFields = h("div", { class: "controls kind-fields" }, field("Product", product), field("Position", position));
  const listFields = h("div", { class: "controls kind-fields" }, field("Products", products));
  const pointsField = field("Points (negative buries)", points);
  listFields.append(pointsField);
  const preview = h("button", { type: "button" }, "Preview draft");
  // The windows a control may name, each with its box (none checked: every window).
  const BOARD_WINDOWS: [Window, HTMLInputElement][] = [
    [Window.DAILY, daily],
    [Window.WEEKLY, weekly],
    [Window.TRENDING, trending],
  ];
  const form = h(
    "form",
    { class: "control-form", "aria-labelledby": "form-title" },
    h("h2", { id: "form-title" }, "Put a control"),
    h("div", { class: "controls" }, field("Id", id), field("Kind", kind)),
    pinFields,
    listFields,
    h(
      "div",
      { class: "controls" },
      field("Segment", segment),
      h(
        "fieldset",
        { class: "windows" },
        h("legend", {}, "Windows (none: every board)"),
        h("label", { class: "check" }, daily, "Daily"),
        h("label", { class: "check" }, weekly, "Weekly"),
        h("label", { class: "check" }, trending, "Trending"),
      ),
      field("From (empty: now)", from),
      field("Until (empty: until deleted)", until),
    ),
    h("div", { class: "controls" }, field("Note", note), h("button", { type: "submit" }, "Save"), preview),
  );
  const shown = () => {
    pinFields.hidden = kind.value !== "pin";
    listFields.hidden = kind.value === "pin";
    pointsField.hidden = kind.value !== "boost";
  };
  kind.addEventListener("change", shown);
  shown();

  /** The form as a control, or what is wrong with it in words. */
  const draft = (): Draft | string => {
    const control: Draft = { controlId: id.value.trim(), segment: segment.value.trim(), note: note.value };
    control.windows = BOARD_WINDOWS.filter(([, box]) => box.checked).map(([w]) => w);
    if (from.value) control.activeFrom = timestampFromMs(new Date(from.value).getTime());
    if (until.value) control.activeUntil = timestampFromMs(new Date(until.value).getTime());
    try {
      if (kind.value === "pin") {
        control.action = { case: "pin", value: { productId: BigInt(product.value.trim()), position: Number(position.value) } };
      } else {
        const ids = products.value.split(/[\s,]+/).filter(Boolean).map((p) => BigInt(p));
        control.action =
          kind.value === "boost" ? { case: "boost", value: { productIds: ids, points: Number(points.value) } } : { case: "exclude", value: { productIds: ids } };
      }
    } catch {
      return "A product id is a whole number.";
    }
    return control;
  };

  const show = (c: Control) => {
    id.value = c.controlId;
    segment.value = c.segment;
    note.value = c.note;
    for (const [w, box] of BOARD_WINDOWS) box.checked = c.windows.includes(w);
    from.value = c.activeFrom ? local(timestampDate(c.activeFrom)) : "";
    until.value = c.activeUntil ? local(timestampDate(c.activeUntil)) : "";
    kind.value = c.action.case ?? "pin";
    if (c.action.case === "pin") {
      product.value = String(c.action.value.productId);
      position.value = String(c.action.value.position);
    } else if (c.action.case === "boost" || c.action.case === "exclude") {
      products.value = c.action.value.productIds.join(", ");
      if (c.action.case === "boost") points.value = String(c.action.value.points);
    }
    shown();
  };

  return {
    form,
    draft,
    show,
    focus: () => id.focus(),
    onPreview: (then: (draft: Draft) => void) =>
      preview.addEventListener("click", () => {
        const d = draft();
        if (typeof d !== "string" && form.reportValidity()) then(d);
      }),
  };
}

/** A date as a datetime-local input holds it: local time, to the minute. */
function local(d: Date): string {
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function productsOf(c: Control): bigint[] {
  if (c.action.case === "pin") return [c.action.value.productId];
  if (c.action.case === "boost" || c.action.case === "exclude") return c.action.value.productIds;
  return [];
}

function actionWords(c: Control): (Node | string)[] {
  const few = (ids: bigint[]) => [...ids.slice(0, 3).flatMap((p, i) => [i ? ", " : "", ...label(p)]), ids.length > 3 ? ` and ${ids.length - 3} more` : ""];
  switch (c.action.case) {
    case "pin":
      return [...label(c.action.value.productId), ` at ${c.action.value.position}`];
    case "boost":
      return [...few(c.action.value.productIds), ` by ${c.action.value.points} points`];
    case "exclude":
      return few(c.action.value.productIds);
    default:
      return [];
  }
}

function boardWords(c: Control): string {
  const windows = c.windows.length === 0 ? "every window" : c.windows.map(windowName).join(" and ");
  return `${c.segment || "whole ranking"}, ${windows}`;
}

function scheduleWords(c: Control): string {
  const at = (t: Control["activeFrom"]) => (t ? timestampDate(t).toLocaleString("en-GB") : "");
  return `${c.activeFrom ? `from ${at(c.activeFrom)}` : "from its put"}${c.activeUntil ? ` until ${at(c.activeUntil)}` : ""}`;
}
