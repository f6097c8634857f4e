// Products by name: the catalog's titles, read with GetCatalog the first time a page shows a
// product and kept for the tab (a bounded map, oldest out first), so every page can say
// "Trail runner 2" where the ranking only knows 4021.

import { h } from "./dom";
import { api } from "./api";

/** How many products' titles the tab keeps. */
const KEPT = 20_000;
/** GetCatalog's most products per call. */
const PER_CALL = 1_000;

/** Product id → its title ("" when it has none); insertion order is age. */
const titles = new Map<string, string>();

/** Reads the titles of `ids` not known yet; a failure leaves them unknown (shown by id). */
export async function learnTitles(ids: Iterable<bigint>, signal?: AbortSignal): Promise<void> {
  const unknown = [...new Set([...ids].filter((id) => id > 0n && !titles.has(String(id))).map(String))];
  for (let i = 0; i < unknown.length; i += PER_CALL) {
    const chunk = unknown.slice(i, i + PER_CALL);
    try {
      const answer = await api.getCatalog({ productIds: chunk.map(BigInt) }, { signal });
      for (const id of chunk) titles.set(id, "");
      for (const entry of answer.products) titles.set(String(entry.productId), entry.title);
    } catch {
      return;
    }
  }
  for (const oldest of titles.keys()) {
    if (titles.size <= KEPT) break;
    titles.delete(oldest);
  }
}

/** The product as words: its title, or "Product <id>" when it has none (or none is known). */
export function nameOf(id: bigint): string {
  return titles.get(String(id)) || `Product ${id}`;
}

/** The product's name, with its id beside a title (ids are what callers of the API use). */
export function label(id: bigint): (Node | string)[] {
  const title = titles.get(String(id));
  return title ? [title, h("span", { class: "id" }, ` #${id}`)] : [`Product ${id}`];
}
