// The controls that pick a ranking (window, date, segment, scoring profile), shared by the pages. They live
// in the page's address (#/board?window=weekly&date=…), so a view can be linked and reloaded.

import { Window } from "./gen/ranking/v1/ranking_pb";
import { field, h } from "./dom";

export interface Choice {
  window: Window;
  /** YYYY-MM-DD, or "" for today. */
  date: string;
  segment: string;
  /** The scoring profile, or "" for the service's own (`default`). */
  profile?: string;
}

const WINDOWS: [string, Window, string][] = [
  ["daily", Window.DAILY, "Daily"],
  ["weekly", Window.WEEKLY, "Weekly (7 days)"],
  ["trending", Window.TRENDING, "Trending (rising now)"],
  ["hourly", Window.HOURLY, "Hourly"],
];

export function choiceOf(params: URLSearchParams): Choice {
  const name = params.get("window") ?? "daily";
  const window = WINDOWS.find(([n]) => n === name)?.[1] ?? Window.DAILY;
  return { window, date: params.get("date") ?? "", segment: params.get("segment") ?? "", profile: params.get("profile") ?? "" };
}

export function windowName(window: Window): string {
  return WINDOWS.find(([, w]) => w === window)?.[0] ?? "daily";
}

/** The choice as address parameters (empty values left out). */
export function paramsOf(choice: Choice, extra: Record<string, string> = {}): URLSearchParams {
  const params = new URLSearchParams();
  params.set("window", windowName(choice.window));
  if (choice.date) params.set("date", choice.date);
  if (choice.segment) params.set("segment", choice.segment);
  if (choice.profile) params.set("profile", choice.profile);
  for (const [k, v] of Object.entries(extra)) if (v) params.set(k, v);
  return params;
}

/**
 * A form of the choice's controls; `apply` gets the new choice when the user submits it.
 * `windows: false` leaves the window out (ExplainRank is about the daily ranking).
 */
export function selector(
  choice: Choice,
  apply: (choice: Choice, form: HTMLFormElement) => void,
  options: { windows?: boolean; profiles?: boolean; lead?: HTMLElement[]; extra?: HTMLElement[]; label?: string } = {},
): HTMLFormElement {
  const window = h(
    "select",
    { name: "window" },
    WINDOWS.map(([name, w, text]) => h("option", { value: name, selected: w === choice.window }, text)),
  );
  const date = h("input", { type: "date", name: "date", value: choice.date });
  const segment = h("input", {
    type: "text",
    name: "segment",
    value: choice.segment,
    placeholder: "whole ranking",
    pattern: "[a-z0-9][a-z0-9_.:\\-]{0,63}",
    title: "A segment name such as category:shoes; empty for the whole ranking",
    autocomplete: "off",
  });
  const profile = h("input", {
    type: "text",
    name: "profile",
    value: choice.profile ?? "",
    placeholder: "default",
    pattern: "[a-z0-9_\\-]{0,64}",
    title: "A scoring profile of the server's RANKING_PROFILES; empty for the service's own",
    autocomplete: "off",
  });
  const form = h(
    "form",
    { class: "controls", "aria-label": options.label ?? "Ranking" },
    options.lead ?? [],
    options.windows === false ? null : field("Window", window),
    field("Date", date),
    field("Segment", segment),
    options.profiles ? field("Profile", profile) : null,
    options.extra ?? [],
    h("button", { type: "submit" }, "Show"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const picked = WINDOWS.find(([n]) => n === window.value)?.[1] ?? Window.DAILY;
    apply(
      { window: options.windows === false ? choice.window : picked, date: date.value, segment: segment.value.trim(), profile: profile.value.trim() },
      form,
    );
  });
  return form;
}
