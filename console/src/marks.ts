// What a merchandiser's controls did to a served entry, as marks beside the product: pinned,
// boosted, buried, and where the product would rank without them. An entry names its
// controls by id; their kinds come from ListControls, read again when an unknown id shows up.

import type { RankedProduct } from "./gen/ranking/v1/ranking_pb";
import { api } from "./api";
import { h, num } from "./dom";

/** A control's kind as the marks say it (of a stored control or of a draft). */
export function kindOf(control: { action?: { case?: string; value?: unknown } }): "pinned" | "boosted" | "buried" | "excluded" {
  switch (control.action?.case) {
    case "pin":
      return "pinned";
    case "boost":
      return ((control.action.value as { points?: number }).points ?? 0) < 0 ? "buried" : "boosted";
    default:
      return "excluded";
  }
}

/** The kinds of a board's controls by id, learned as entries name them. */
export class ControlKinds {
  private kinds = new Map<string, string>();
  private asked = new Set<string>();

  /** Reads the controls again when `products` name one not known (each unknown id asks once). */
  async learn(products: RankedProduct[], signal?: AbortSignal): Promise<void> {
    const unknown = products.flatMap((p) => p.controlIds).filter((id) => !this.kinds.has(id) && !this.asked.has(id));
    if (unknown.length === 0) return;
    for (const id of unknown) this.asked.add(id);
    try {
      const answer = await api.listControls({}, { signal });
      for (const c of answer.controls) this.kinds.set(c.controlId, kindOf(c));
    } catch {
      // Marks without kinds say "controlled"; the board itself is not held up.
    }
  }

  /** Knows a control not stored (a draft being previewed). */
  teach(id: string, kind: string): void {
    this.kinds.set(id, kind);
  }

  /** The marks of an entry: one per control acting on it, and its organic rank if it moved. */
  marks(p: RankedProduct): HTMLElement[] {
    const marks = p.controlIds.map((id) => {
      const kind = this.kinds.get(id) ?? "controlled";
      return h("span", { class: `mark ${kind}`, title: `${kind} by control ${id}` }, kind);
    });
    if (p.controlIds.length > 0 && p.organicRank !== p.rank) {
      marks.push(h("span", { class: "organic" }, p.organicRank === 0n ? "not ranked organically" : `organic ${num(p.organicRank)}`));
    }
    return marks;
  }
}
