// The catalog: name a product, hide or show it, set its segments. Shown only to a token that
// may change the catalog; an entry replaces the product's whole entry, so the form is filled
// with the stored one when a product is named.

import { api } from "./api";
import { field, fill, h, say, statusLine } from "./dom";
import { report, type Page } from "./page";

export const catalog: Page = ({ main, params, askToken }) => {
  const id = h("input", { type: "text", inputmode: "numeric", name: "id", required: true, pattern: "-?[0-9]{1,19}", value: params.get("id") ?? "", autocomplete: "off" });
  const segments = h("input", {
    type: "text",
    name: "segments",
    placeholder: "category:shoes, brand:acme",
    autocomplete: "off",
    "aria-describedby": "segments-help",
  });
  const title = h("input", { type: "text", name: "title", maxlength: 200, autocomplete: "off" });
  const hidden = h("input", { type: "checkbox", name: "hidden" });
  const status = statusLine();
  const form = h(
    "form",
    { class: "controls catalog", "aria-label": "Catalog entry" },
    field("Product", id),
    field("Title", title),
    field("Segments", segments),
    h("label", { class: "check" }, hidden, h("span", {}, "Hidden from every ranking")),
    h("button", { type: "submit" }, "Save"),
  );
  fill(
    main,
    h("h1", {}, "Catalog"),
    h("p", { id: "segments-help" }, "Saving replaces the product's title, segments (comma-separated, up to 32) and its hidden flag. A hidden product keeps its events and leaves every ranking until it is shown again."),
    form,
    status,
  );
  // The stored entry of the product named, so that saving changes only what the user changed.
  const load = () => {
    let productId: bigint;
    try {
      productId = BigInt(id.value.trim());
    } catch {
      return;
    }
    if (productId < 1n) return;
    // A field the user changed while the entry was being read keeps what they typed.
    const was = { title: title.value, segments: segments.value, hidden: hidden.checked };
    void api
      .getCatalog({ productIds: [productId] })
      .then((answer) => {
        const entry = answer.products[0];
        if (title.value === was.title) title.value = entry?.title ?? "";
        if (segments.value === was.segments) segments.value = entry?.segments.join(", ") ?? "";
        if (hidden.checked === was.hidden) hidden.checked = entry?.hidden ?? false;
      })
      .catch((error) => report(status, error, askToken));
  };
  id.addEventListener("change", load);
  if (id.value) load();
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    let productId: bigint;
    try {
      productId = BigInt(id.value.trim());
    } catch {
      say(status, "A product id is a whole number.");
      return;
    }
    const names = segments.value.split(",").map((s) => s.trim()).filter(Boolean);
    void api
      .updateCatalog({ products: [{ productId, segments: names, hidden: hidden.checked, title: title.value.trim() }] })
      .then(() => say(status, `Saved: product ${productId} is ${hidden.checked ? "hidden" : "shown"}${names.length ? `, in ${names.join(", ")}` : ", in no segment"}.`, "info"))
      .catch((error) => report(status, error, askToken));
  });
  return () => {};
};
