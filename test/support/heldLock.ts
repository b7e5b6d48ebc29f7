// A transaction held open on a connection of its own until the test releases it: the dialect harnesses' row locks
// (lockIntentRow, holdRowLock) take their locks in `lock`, then wait here with them held.

/** A lock a test holds: who waits on it, and its release (the transaction ends; resolves once it has). */
export interface HeldLock {
  /** The holding session (PostgreSQL backend pid, MySQL connection id), for messages. */
  session: number;
  /** Sessions waiting on this transaction's locks now. */
  waiters(): Promise<number>;
  release(): Promise<void>;
}

/** Starts a transaction (`transaction`), runs `lock` in it, and keeps it open until the returned function is called
 *  (then it commits, and `close` ends the connection). Resolves once `lock` is done; rejects if it failed. */
export async function holdTransaction<Tx>(transaction: (fn: (tx: Tx) => Promise<void>) => Promise<void>, lock: (tx: Tx) => Promise<void>,
  close: () => Promise<void>): Promise<() => Promise<void>> {
  let unlock!: () => void;
  const released = new Promise<void>((r) => (unlock = r));
  let locked!: () => void;
  const held = new Promise<void>((r) => (locked = r));
  const done = transaction(async (tx) => {
    await lock(tx);
    locked();
    await released;
  }).finally(() => close().catch(() => {}));
  await Promise.race([held, done]);
  return async () => {
    unlock();
    await done;
  };
}
