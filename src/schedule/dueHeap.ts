// Indexed binary min-heap of intents keyed by (due time, intent id): O(log n) insert, update, remove, pop.
// Each slot remembers its own position, so sifting moves slots without touching the id → slot map (one map
// write per insert, one delete per removal), and sifts move a hole instead of swapping pairs.
export interface DueEntry {
  intentId: string;
  /** Due time, database clock, epoch milliseconds. */
  dueMs: number;
  attemptCount: number;
  maxAttempts: number;
  version: string;
}

interface Slot {
  e: DueEntry;
  /** Position in `items`. */
  at: number;
}

const before = (a: DueEntry, b: DueEntry) => a.dueMs < b.dueMs || (a.dueMs === b.dueMs && a.intentId < b.intentId);

export class DueHeap {
  private items: Slot[] = [];
  private index = new Map<string, Slot>();

  get size(): number {
    return this.items.length;
  }

  peek(): DueEntry | undefined {
    return this.items[0]?.e;
  }

  get(intentId: string): DueEntry | undefined {
    return this.index.get(intentId)?.e;
  }

  /** Every entry, in no particular order (a snapshot: the heap may be changed while it is used). */
  entries(): DueEntry[] {
    return this.items.map((s) => s.e);
  }

  /** Insert or replace the entry for its intent id. */
  upsert(e: DueEntry): void {
    const slot = this.index.get(e.intentId);
    if (slot === undefined) {
      const s: Slot = { e, at: this.items.length };
      this.items.push(s);
      this.index.set(e.intentId, s);
      this.up(s);
    } else {
      slot.e = e;
      this.fix(slot);
    }
  }

  remove(intentId: string): DueEntry | undefined {
    const slot = this.index.get(intentId);
    if (slot === undefined) return undefined;
    this.index.delete(intentId);
    this.detach(slot);
    return slot.e;
  }

  pop(): DueEntry | undefined {
    const top = this.items[0];
    if (top === undefined) return undefined;
    this.index.delete(top.e.intentId);
    this.detach(top);
    return top.e;
  }

  clear(): void {
    this.items = [];
    this.index.clear();
  }

  /** Take `slot` out of the array: the last slot fills its place and is sifted to where it belongs. */
  private detach(slot: Slot): void {
    const last = this.items.pop()!;
    if (last === slot) return;
    last.at = slot.at;
    this.items[slot.at] = last;
    this.fix(last);
  }

  private fix(slot: Slot): void {
    const at = slot.at;
    this.up(slot);
    if (slot.at === at) this.down(slot);
  }

  private up(slot: Slot): void {
    const items = this.items;
    let i = slot.at;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = items[p]!;
      if (!before(slot.e, parent.e)) break;
      items[i] = parent;
      parent.at = i;
      i = p;
    }
    items[i] = slot;
    slot.at = i;
  }

  private down(slot: Slot): void {
    const items = this.items;
    const n = items.length;
    let i = slot.at;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && before(items[r]!.e, items[l]!.e) ? r : l;
      const child = items[c]!;
      if (!before(child.e, slot.e)) break;
      items[i] = child;
      child.at = i;
      i = c;
    }
    items[i] = slot;
    slot.at = i;
  }
}
