// The fenced-transaction protocol, written once for every dialect (each supplies its transaction, fence check
// and audit insert): in ONE transaction, the fence (the lease row read by (name, holder, epoch, not expired)
// and locked for share to commit; none = lease lost, roll back so nothing of ours commits), the work, and its
// audit row when it wrote rows (numbered while the lock is held).
import type { Fenced } from './ports.js';

class LeaseLostSignal extends Error {}

export interface FencedSteps<Tx> {
  /** BEGIN … COMMIT on one connection; ROLLBACK when the body throws. */
  transaction<V>(body: (tx: Tx) => Promise<V>): Promise<V>;
  /** The fence statement: true when the lease row is held by the token (and now locked to commit). */
  fence(tx: Tx): Promise<boolean>;
  /** Append the audit row of a write of `rowsWritten` rows. */
  audit(tx: Tx, rowsWritten: number): Promise<unknown>;
}

export async function runFenced<Tx, T>(steps: FencedSteps<Tx>, fn: (tx: Tx) => Promise<{ value: T; rowsWritten: number }>): Promise<Fenced<T>> {
  try {
    const value = await steps.transaction(async (tx) => {
      if (!(await steps.fence(tx))) throw new LeaseLostSignal(); // rolls back: nothing of ours commits
      const out = await fn(tx);
      if (out.rowsWritten > 0) await steps.audit(tx, out.rowsWritten);
      return out.value;
    });
    return { kind: 'ok', value };
  } catch (e) {
    if (e instanceof LeaseLostSignal) return { kind: 'leaseLost' };
    throw e;
  }
}
