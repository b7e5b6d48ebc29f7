// The provider's in-flight cap, as one process's guard keeps it: permits held (attempts started, their calls sent or
// waiting to be sent) and, of them, calls sent. The cap bounds calls sent (begin); permits may exceed it by the
// room an asker of `ahead` is given, so that attempts can wait for a call to end (the executor's ready attempts).
// A sender or an asker refused by the cap is called back once a sent call ends, permits come back or the cap grows,
// in a microtask.
// May import: nothing (a leaf).

export class CallSlots {
  private held = 0;
  private out = 0;
  private readonly waiting = new Set<() => void>();
  /** Calls in flight allowed (0: no cap); partitions led (at least 1), each allowed `aheadPerPartition` beyond it;
   *  the permits the led partitions' own parts allow together (each part at least 1: with fewer permits than
   *  partitions their sum exceeds the cap), which the room beyond the cap starts from. */
  private cap: number;
  private led = 1;
  private parts: number;

  constructor(cap: number, private readonly aheadPerPartition: number) {
    this.cap = cap;
    this.parts = cap;
  }

  /** Permits held, and calls sent. */
  get permits(): number { return this.held; }
  get sent(): number { return this.out; }
  /** The cap (0: none). */
  get limit(): number { return this.cap; }

  /** How many of `n` permits may be taken now: up to the cap, and for an asker of `ahead` room, up to the larger of
   *  that and `aheadPerPartition` per partition led beyond it (so one partition's waiting attempts never take the
   *  permits of another's own part when it asks for some too; one asking none gets none beyond the cap). */
  room(n: number, ahead: number): number {
    if (this.cap <= 0) return n;
    const cap = ahead > 0 ? Math.max(this.cap, this.parts) + Math.max(ahead, this.aheadPerPartition * this.led) : this.cap;
    return Math.min(n, Math.max(0, cap - this.held));
  }

  take(n: number): void {
    this.held += n;
  }

  /** An asker refused room (room < n): `onRoom` is called back once, when calls or permits have freed since. */
  waitRoom(onRoom: () => void): void {
    this.waiting.add(onRoom);
  }

  /** A permit's call goes out: false when the calls sent are at the cap (`onFree` is then called back once). */
  begin(onFree?: () => void): boolean {
    if (this.cap > 0 && this.out >= this.cap) {
      if (onFree) this.waiting.add(onFree);
      return false;
    }
    this.out += 1;
    return true;
  }

  /** Permits given back unused (`begun`: their calls had been let out, then stopped before sending). */
  giveBack(n: number, begun: boolean): void {
    this.held = Math.max(0, this.held - n);
    if (begun) this.callsEnded(n);
    else this.freed();
  }

  /** A sent call was answered (or ended inconclusive): its permit and its place go. */
  answered(): void {
    this.held = Math.max(0, this.held - 1);
    this.callsEnded(1);
  }

  /** The share in force (`parts`: the led partitions' own parts together, default the cap): a cap raised (or
   *  lifted), or more room beyond it, calls back the refused. */
  setCap(cap: number, led: number, parts = cap): void {
    const raised = this.cap > 0 && (cap === 0 || cap > this.cap || parts > this.parts || Math.max(1, led) > this.led);
    this.cap = cap;
    this.led = Math.max(1, led);
    this.parts = parts;
    if (raised) this.freed();
  }

  private callsEnded(n: number): void {
    this.out = Math.max(0, this.out - n);
    this.freed();
  }

  private freed(): void {
    if (this.waiting.size === 0) return;
    const waiting = [...this.waiting];
    this.waiting.clear();
    // Never inside the caller's own send loop; before the ended call's own batch is woken, so the others get a turn.
    queueMicrotask(() => { for (const w of waiting) w(); });
  }
}
