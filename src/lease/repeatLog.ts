// The level of a record that repeats (a follower refused the lease every tick): info when the observation is news
// or, for a repeat, once every `infoEveryMs` (with `repeats`, the debug records since the last info), debug
// otherwise. So the default level shows each change at once and a live follower once a period, never every tick.

export class RepeatLog {
  private last: string | null = null;
  private lastInfoMs = Number.NEGATIVE_INFINITY;
  private repeats = 0;

  constructor(private readonly infoEveryMs: number) {}

  /** `observed` identifies what was seen; `nowMs` is monotonic. */
  next(observed: string, nowMs: number): { level: 'info' | 'debug'; repeats?: number } {
    const changed = observed !== this.last;
    this.last = observed;
    if (!changed && nowMs - this.lastInfoMs < this.infoEveryMs) {
      this.repeats++;
      return { level: 'debug' };
    }
    const out = changed ? { level: 'info' as const } : { level: 'info' as const, repeats: this.repeats };
    this.lastInfoMs = nowMs;
    this.repeats = 0;
    return out;
  }

  /** Forget the last observation: the next one is news. */
  reset(): void {
    this.last = null;
  }
}
