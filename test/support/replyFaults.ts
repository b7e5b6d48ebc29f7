// Indeterminate outcomes for tests: an ExecutionStore decorator whose calls can fail before reaching the database
// ('fail': nothing committed) or commit and then lose their reply ('replyLost': the real call ran, the caller
// sees a client-side error), as a client deadline or a connection reset after commit does.
import type { ExecutionStore } from '../../src/store/intentPorts.js';
import { StoreError } from '../../src/store/ports.js';

export type ReplyFault = 'fail' | 'replyLost' | null;

type Method = keyof ExecutionStore;

/** Decide per call: `faults[method]()` returns the fault of this call (null: none). */
export function withReplyFaults(s: ExecutionStore, faults: Partial<Record<Method, () => ReplyFault>>): ExecutionStore {
  const wrap = <K extends Method>(k: K): ExecutionStore[K] => (async (...args: unknown[]) => {
    const fault = faults[k]?.() ?? null;
    if (fault === 'fail') throw new StoreError('transient', `simulated: ${k} failed before commit (connection reset)`, 'ECONNRESET');
    const out = await (s[k] as (...a: unknown[]) => Promise<unknown>).apply(s, args);
    if (fault === 'replyLost') throw new StoreError('transient', `simulated: ${k} committed, its reply lost (client deadline)`, 'CLIENT_DEADLINE');
    return out;
  }) as ExecutionStore[K];
  return {
    rebuildStart: wrap('rebuildStart'), loadScheduled: wrap('loadScheduled'), refreshPage: wrap('refreshPage'),
    fencedRecoverOrphans: wrap('fencedRecoverOrphans'), fencedStartAttempts: wrap('fencedStartAttempts'),
    fencedCompleteAttempts: wrap('fencedCompleteAttempts'),
  };
}

/** Poll `cond` every 10 ms until true (throws after `timeoutMs`). */
export async function until(cond: () => boolean | Promise<boolean>, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`${what} not reached within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
