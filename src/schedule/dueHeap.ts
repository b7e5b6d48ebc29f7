// Indexed binary min-heap of intents keyed by (due time, intent id): O(log n) insert, update, remove, pop.
export interface DueEntry {
  intentId: string;
  /** Due time, database clock, epoch milliseconds. */
  dueMs: number;
  attemptCount: number;
  maxAttempts: number;
  version: string;
}

const before = (a: DueEntry, b: DueEntry) => a.dueMs < b.dueMs || (a.dueMs === b.dueMs && a.intentId < b.intentId);

export class DueHeap {
  private items: DueEntry[] = [];
  private index = new Map<string, number>();

  get size(): number {
    return this.items.length;
  }

  peek(): DueEntry | undefined {
    return this.items[0];
  }

  get(intentId: string): DueEntry | undefined {
    const i = this.index.get(intentId);
    return i === undefined ? undefined : this.items[i];
  }

  /** Insert or replace the entry for its intent id. */
  upsert(e: DueEntry): void {
    const i = this.index.get(e.intentId);
    if (i === undefined) {
      this.items.push(e);
      this.index.set(e.intentId, this.items.length - 1);
      this.up(this.items.length - 1);
    } else {
      this.items[i] = e;
      this.down(this.up(i));
    }
  }

  remove(intentId: string): DueEntry | undefined {
    const i = this.index.get(intentId);
    if (i === undefined) return undefined;
    const removed = this.items[i]!;
    const last = this.items.pop()!;
    this.index.delete(intentId);
    if (i < this.items.length) {
      this.items[i] = last;
      this.index.set(last.intentId, i);
      this.down(this.up(i));
    }
    return removed;
  }

  pop(): DueEntry | undefined {
    const top = this.items[0];
    if (top) this.remove(top.intentId);
    return top;
  }

  clear(): void {
    this.items = [];
    this.index.clear();
  }

  private swap(i: number, j: number): void {
    const a = this.items[i]!;
    const b = this.items[j]!;
    this.items[i] = b;
    this.items[j] = a;
    this.index.set(b.intentId, i);
    this.index.set(a.intentId, j);
  }

  private up(i: number): number {
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(this.items[i]!, this.items[p]!)) break;
      this.swap(i, p);
      i = p;
    }
    return i;
  }

  private down(i: number): void {
    const n = this.items.length;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < n && before(this.items[l]!, this.items[m]!)) m = l;
      if (r < n && before(this.items[r]!, this.items[m]!)) m = r;
      if (m === i) return;
      this.swap(i, m);
      i = m;
    }
  }
}
