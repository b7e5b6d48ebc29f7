// The clock port. Only monotonic time is used for local decisions (the local deadline, intervals);
// every comparison with lease or schedule times happens in SQL against database time.
export interface Clock {
  /** Monotonic milliseconds (arbitrary origin). */
  nowMs(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  nowMs: () => performance.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve) => {
      if (signal?.aborted || ms <= 0) return resolve();
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        signal?.removeEventListener('abort', done);
        resolve();
      }
      signal?.addEventListener('abort', done, { once: true });
    }),
};

/** A manually advanced clock for tests; sleep() resolves when advance() passes its wake time. */
export class FakeClock implements Clock {
  private t = 0;
  private sleepers: { at: number; resolve: () => void }[] = [];
  nowMs(): number {
    return this.t;
  }
  sleep(ms: number): Promise<void> {
    if (ms <= 0) return Promise.resolve();
    return new Promise((resolve) => this.sleepers.push({ at: this.t + ms, resolve }));
  }
  advance(ms: number): void {
    this.t += ms;
    const due = this.sleepers.filter((s) => s.at <= this.t);
    this.sleepers = this.sleepers.filter((s) => s.at > this.t);
    for (const s of due) s.resolve();
  }
}
