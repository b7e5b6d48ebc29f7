// Provider calls in flight, owned by the executor rather than one tick: a tick that ends at its deadline while
// still leading leaves its calls running (the next occurrence of the timer follows within the hand-off margin),
// and their completions wait in the CompletionBuffer for the next tick's fence. Every batch counts these calls
// against EXECUTOR_CONCURRENCY and is woken when one finishes; a step-down or drain awaits them all.
export class InFlightCalls {
  private readonly calls = new Set<Promise<void>>();
  private listener: (() => void) | null = null;

  get size(): number {
    return this.calls.size;
  }

  /** Track `call`; when it settles it leaves the set first, then the watching batch (if any) is woken. */
  add(call: Promise<void>): void {
    const tracked: Promise<void> = call.finally(() => {
      this.calls.delete(tracked);
      this.listener?.();
    });
    this.calls.add(tracked);
  }

  /** Wake the watching batch (if any), as a call that finishes does. */
  notify(): void {
    this.listener?.();
  }

  /** The batch to wake when a call finishes (one at a time; null: none). */
  watch(listener: (() => void) | null): void {
    this.listener = listener;
  }

  /** Resolves once no call is in flight (calls added meanwhile are awaited too). Never rejects. */
  async settled(): Promise<void> {
    while (this.calls.size > 0) await Promise.allSettled([...this.calls]);
  }
}
