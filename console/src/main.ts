// The console's shell: the pages behind the address's #/page?params, the navigation, and
// the token panel.

import "./style.css";
import { access, setToken, token } from "./api";
import { board } from "./board";
import { catalog } from "./catalog";
import { compare } from "./compare";
import { controls } from "./controls";
import { h } from "./dom";
import { movers } from "./movers";
import type { Page } from "./page";
import { product } from "./product";

const PAGES: Record<string, Page> = { board, product, movers, compare, catalog, controls };
const TITLES: Record<string, string> = { board: "Board", product: "Product", movers: "Movers", compare: "Compare", catalog: "Catalog", controls: "Controls" };

const main = document.getElementById("main")!;
const tokenButton = document.getElementById("token-button")!;
const catalogLink = document.querySelector<HTMLElement>('a[data-page="catalog"]')!.parentElement!;
const controlsLink = document.querySelector<HTMLElement>('a[data-page="controls"]')!.parentElement!;
let leave: () => void = () => {};
let panel: HTMLElement | null = null;

function route(): { name: string; params: URLSearchParams } {
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  const name = path in PAGES ? path : "board";
  return { name, params: new URLSearchParams(query ?? "") };
}

function navigate(page: string, params: URLSearchParams): void {
  const query = params.toString();
  location.hash = `#/${page}${query ? `?${query}` : ""}`;
}

/** Whether the address names a page (`#/…`), rather than a place in this one (the skip link's `#main`). */
function namesAPage(): boolean {
  return location.hash === "" || location.hash.startsWith("#/");
}

function show(): void {
  if (!namesAPage()) return;
  leave();
  const { name, params } = route();
  const closed = { catalog: [catalogLink, "Changing the catalog needs a token that may write to it."], controls: [controlsLink, "Merchandising controls need the admin token."] } as const;
  if ((name === "catalog" || name === "controls") && closed[name][0].hidden) {
    leave = () => {};
    main.replaceChildren(h("h1", {}, TITLES[name]), h("p", {}, `${closed[name][1]} Enter it with the Token button.`));
    return;
  }
  for (const link of document.querySelectorAll<HTMLAnchorElement>("nav a")) {
    if (link.dataset.page === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${TITLES[name]} · Rankings console`;
  leave = PAGES[name]({ main, params, navigate, askToken: openPanel });
}

/** The token panel, above the page: one token for the tab, kept until the tab closes. */
function openPanel(): void {
  if (panel) {
    panel.querySelector("input")?.focus();
    return;
  }
  const input = h("input", { type: "password", name: "token", autocomplete: "off", value: token(), id: "token-input" });
  const form = h(
    "form",
    { class: "token-panel", "aria-label": "Access token" },
    h("label", { for: "token-input" }, "Access token"),
    input,
    h("button", { type: "submit" }, "Use token"),
    h("button", { type: "button", class: "link", onclick: () => { setToken(""); closePanel(); } }, "Forget"),
    h("button", { type: "button", class: "link", onclick: () => closePanel() }, "Close"),
    h("p", { class: "hint" }, "The read token opens the board, products and movers; the catalog needs a token that may change it, the controls the admin token."),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    setToken(input.value.trim());
    closePanel();
  });
  panel = form;
  document.querySelector("header")!.after(form);
  input.focus();
}

function closePanel(): void {
  panel?.remove();
  panel = null;
  void refreshAccess().then(show);
  tokenButton.focus();
}

async function refreshAccess(): Promise<void> {
  const may = await access();
  catalogLink.hidden = !may.catalog;
  controlsLink.hidden = !may.admin;
}

tokenButton.addEventListener("click", openPanel);
window.addEventListener("hashchange", show);
// The skip link moves the reader to the page's content without leaving the page.
document.querySelector<HTMLAnchorElement>("a.skip")!.addEventListener("click", (event) => {
  event.preventDefault();
  main.focus();
});
void refreshAccess().finally(show);
