// A batch's fenced STARTs in flight: at most MAX_STARTS_IN_FLIGHT at once, so a slot freed while one is on the wire
// need not wait for it to end. Each holds the due intents it took as reserved slots until it has settled, by which
// time its started attempts' calls are in flight: calls in flight + reserved slots never exceed the concurrency.
// The intents a start took are claimed in the schedule (Schedule.takeDue) before it is tracked here, so no other
// start is offered them.

/** Fenced STARTs one batch may have in flight at once. */
export const MAX_STARTS_IN_FLIGHT = 2;

export class StartsInFlight {
  private readonly running = new Set<Promise<void>>();
  private reservedSlots = 0;

  get size(): number {
    return this.running.size;
  }

  /** Slots held by the starts in flight: the intents they took, not yet calls in flight. */
  get reserved(): number {
    return this.reservedSlots;
  }

  /** Slots one more start may take now (0: none may begin): `callsInFlight` and the reserved slots count against
   *  the concurrency; fewer than a start batch only when nothing at all is in flight. */
  startable(callsInFlight: number, s: { concurrency: number; startBatch: number }): number {
    const free = s.concurrency - callsInFlight - this.reservedSlots;
    const idle = callsInFlight === 0 && this.running.size === 0;
    return this.running.size < MAX_STARTS_IN_FLIGHT && free > 0 && (free >= s.startBatch || idle) ? free : 0;
  }

  /** Track `start` (it never rejects), holding `slots` until it settles; then its slots are free and `ended` runs. */
  add(slots: number, start: Promise<void>, ended: () => void): void {
    this.reservedSlots += slots;
    const tracked: Promise<void> = start.finally(() => {
      this.running.delete(tracked);
      this.reservedSlots -= slots;
      ended();
    });
    this.running.add(tracked);
  }

  /** Resolves once no start is in flight (starts added meanwhile are awaited too). Never rejects. */
  async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }
}
