// A batch size that shrinks when a batch fails and grows back as batches succeed (River's maintenance services shrink
// their batch on a timeout the same way). The partition changer sizes its reads and writes with it, so a batch the
// server cannot finish within its statement timeout (a slow disk, a cold cache, a lock wait) is tried again smaller
// at the next step instead of failing the same way forever: at `min` a batch costs little whatever the table holds.
// It grows back only after GROW_AFTER successes in a row, so a size that fails is not retried at every other batch.
const GROW_AFTER = 8;

export class AdaptiveLimit {
  private current: number;
  private streak = 0;

  constructor(private readonly max: number, private readonly min = 1) {
    if (!Number.isInteger(max) || max < 1 || !Number.isInteger(this.min) || this.min < 1) throw new RangeError(`limit ${min}..${max}`);
    this.current = max;
  }

  /** The size to use now, min..max. */
  get value(): number {
    return this.current;
  }

  /** The last batch failed (whatever the error: a smaller one is never wrong, only slower): halve, not below min. */
  failed(): void {
    this.current = Math.max(this.min, Math.floor(this.current / 2));
    this.streak = 0;
  }

  /** The last batch succeeded: after GROW_AFTER in a row, double, not above max. */
  succeeded(): void {
    if (++this.streak < GROW_AFTER) return;
    this.current = Math.min(this.max, this.current * 2);
    this.streak = 0;
  }

  /** Run `batch` with the size now, shrinking after a failure (rethrown) and growing after a success. */
  async run<T>(batch: (limit: number) => Promise<T>): Promise<T> {
    try {
      const out = await batch(this.current);
      this.succeeded();
      return out;
    } catch (e) {
      this.failed();
      throw e;
    }
  }
}
