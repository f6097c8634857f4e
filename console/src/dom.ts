// A few DOM helpers: elements built from tags, attributes and children, and the formats the
// pages share.

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;

/** `<tag attrs…>children…</tag>`; `on…` attributes are listeners, `false`/null ones are left out. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "style") {
      // Through the CSSOM: the page's Content-Security-Policy refuses style attributes.
      el.style.cssText = String(value);
    } else if (value === true) {
      el.setAttribute(name, "");
    } else {
      el.setAttribute(name, String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el: Node, children: (Child | Child[])[]): void {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
}

/** Replaces the children of `el`. */
export function fill(el: Element, ...children: (Child | Child[])[]): void {
  el.replaceChildren();
  append(el, children);
}

const integer = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat("en-US", { maximumFractionDigits: 4 });

/** A score or count as the pages show it: digits grouped, at most four decimals. */
export function num(value: number | bigint): string {
  return typeof value === "bigint" ? integer.format(value) : decimal.format(value);
}

/** "12 s ago", "3 min ago", … of a Unix-milliseconds instant. */
export function age(unixMs: bigint, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - Number(unixMs)) / 1000));
  if (s < 90) return `${s} s ago`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
}

/** The time of a Unix-milliseconds instant, in the browser's zone. */
export function clock(unixMs: bigint): string {
  return new Date(Number(unixMs)).toLocaleTimeString("en-GB");
}

/** A labelled control: `<label>text <control></label>` as one flex item. */
export function field(text: string, control: HTMLElement): HTMLLabelElement {
  return h("label", { class: "field" }, h("span", {}, text), control);
}

/** Says `text` on a status line: a refusal or failure ("error", the default), or news. */
export function say(el: HTMLElement, text: string, kind: "error" | "info" = "error"): void {
  el.dataset.kind = kind;
  el.textContent = text;
}

/** A status line read out by screen readers when it changes. */
export function statusLine(): HTMLParagraphElement {
  return h("p", { class: "status", role: "status", "aria-live": "polite" });
}
