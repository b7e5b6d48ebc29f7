// The Functions host's listener lock (azure-webjobs-sdk SingletonListener + SingletonManager), which makes a
// timer function run on one instance at a time:
// - start: one acquire attempt for the lock period; on success the listener (the timer) starts;
// - held: renewed every half period; a transient renew error retries sooner (halving, down to 1 s); a renew
//   refused (another lease now holds the blob) stops the listener and starts over (one attempt, then polling);
// - not held: one acquire attempt every recovery polling interval (the host's listenerLockRecoveryPollingInterval);
// - stop (graceful shutdown): the listener stops and the lease is released, so another instance takes it at its
//   next poll; a crash releases nothing: the lease runs out after at most one lock period.
// The lock is no fencing token: a paused holder can lose it while its invocation still runs (the SQL lease fences).

/** Where the locks live: blob leases (AzureWebJobsStorage, shared by processes) or memory (one process). */
export interface ListenerLockStore {
  /** Human description for the start banner. */
  readonly where: string;
  /** Take the lock for `periodMs` (null: another lease holds it). Throws only for failures. */
  tryAcquire(lockId: string, owner: string, periodMs: number): Promise<string | null>;
  /** Extend our lease; 'lost' when another lease holds the blob now. Throws only for failures. */
  renew(lockId: string, leaseId: string): Promise<'renewed' | 'lost'>;
  /** Let go (ignores a lease that is no longer ours). */
  release(lockId: string, leaseId: string): Promise<void>;
  /** Who holds the lock now (the owner given at acquire), null when free. */
  owner(lockId: string): Promise<string | null>;
  close(): Promise<void>;
}

/** In-process locks with blob-lease semantics: an expired lease can be renewed until someone else acquires. */
export class MemoryLockStore implements ListenerLockStore {
  readonly where = 'in process (one process; set AzureWebJobsStorage to share locks across processes)';
  private readonly leases = new Map<string, { leaseId: string; owner: string; expiresAtMs: number; periodMs: number }>();
  private seq = 0;

  constructor(private readonly now: () => number = () => performance.now()) {}

  async tryAcquire(lockId: string, owner: string, periodMs: number): Promise<string | null> {
    const l = this.leases.get(lockId);
    if (l && l.expiresAtMs > this.now()) return null;
    const leaseId = `mem-${++this.seq}`;
    this.leases.set(lockId, { leaseId, owner, periodMs, expiresAtMs: this.now() + periodMs });
    return leaseId;
  }

  async renew(lockId: string, leaseId: string): Promise<'renewed' | 'lost'> {
    const l = this.leases.get(lockId);
    if (!l || l.leaseId !== leaseId) return 'lost';
    l.expiresAtMs = this.now() + l.periodMs;
    return 'renewed';
  }

  async release(lockId: string, leaseId: string): Promise<void> {
    if (this.leases.get(lockId)?.leaseId === leaseId) this.leases.delete(lockId);
  }

  async owner(lockId: string): Promise<string | null> {
    const l = this.leases.get(lockId);
    return l && l.expiresAtMs > this.now() ? l.owner : null;
  }

  async close(): Promise<void> {}
}

export interface ListenerLockOptions {
  store: ListenerLockStore;
  lockId: string;
  owner: string;
  periodMs: number;
  /** null: no recovery polling (an instance that missed the lock at start never takes it). */
  recoveryPollingMs: number | null;
  /** The listener starts (lock taken) / stops (lock lost, or stop()). */
  onAcquired(): void;
  onReleased(reason: 'lost' | 'stopped'): void;
  /** A renew or acquire failure (logged by the caller; the lock keeps trying). */
  onError(op: 'acquire' | 'renew' | 'release', e: unknown): void;
  /** Every acquire attempt's and renewal's outcome, with the wall-clock time it was sent (the lease counts from no
   *  earlier): the lock's own record of when its lease could end and when each poll came. */
  onOutcome?(op: 'acquire' | 'renew', outcome: 'acquired' | 'busy' | 'renewed' | 'lost' | 'error', sentAtMs: number): void;
}

/** The host retries a failed renewal sooner, down to 1 s (scaled down for sub-second test periods). */
const MIN_RENEW_MS = 1_000;

export class ListenerLock {
  private leaseId: string | null = null;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private busy: Promise<void> = Promise.resolve();

  constructor(private readonly o: ListenerLockOptions) {}

  get held(): boolean {
    return this.leaseId !== null;
  }

  /** One acquire attempt; polling at the recovery interval when it fails. */
  start(): Promise<void> {
    return this.serial(() => this.attempt());
  }

  /** Stop polling/renewing; release the lease if held (graceful). */
  stop(): Promise<void> {
    this.stopped = true;
    this.clear();
    return this.serial(async () => {
      const id = this.leaseId;
      if (id === null) return;
      this.leaseId = null;
      this.o.onReleased('stopped');
      await this.o.store.release(this.o.lockId, id).catch((e: unknown) => this.o.onError('release', e));
    });
  }

  /** Stop timers without releasing: what a crashed process leaves behind (tests). */
  abandon(): void {
    this.stopped = true;
    this.clear();
  }

  private serial(fn: () => Promise<void>): Promise<void> {
    this.busy = this.busy.then(fn, fn);
    return this.busy;
  }

  private clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private later(ms: number, fn: () => Promise<void>): void {
    this.clear();
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.serial(fn), ms);
    this.timer.unref?.();
  }

  private async attempt(): Promise<void> {
    if (this.stopped || this.leaseId !== null) return;
    let id: string | null = null;
    const sentAtMs = Date.now();
    try {
      id = await this.o.store.tryAcquire(this.o.lockId, this.o.owner, this.o.periodMs);
      this.o.onOutcome?.('acquire', id === null ? 'busy' : 'acquired', sentAtMs);
    } catch (e) {
      this.o.onOutcome?.('acquire', 'error', sentAtMs);
      this.o.onError('acquire', e);
    }
    if (this.stopped) {
      if (id !== null) await this.o.store.release(this.o.lockId, id).catch(() => {});
      return;
    }
    if (id === null) {
      if (this.o.recoveryPollingMs !== null) this.later(this.o.recoveryPollingMs, () => this.attempt());
      return;
    }
    this.leaseId = id;
    this.o.onAcquired();
    this.later(this.o.periodMs / 2, () => this.renew(this.o.periodMs / 2));
  }

  private async renew(lastDelayMs: number): Promise<void> {
    const id = this.leaseId;
    if (this.stopped || id === null) return;
    let out: 'renewed' | 'lost' | 'error';
    const sentAtMs = Date.now();
    try {
      out = await this.o.store.renew(this.o.lockId, id);
    } catch (e) {
      this.o.onError('renew', e);
      out = 'error';
    }
    this.o.onOutcome?.('renew', out, sentAtMs);
    if (this.stopped || this.leaseId !== id) return;
    if (out === 'renewed') return this.later(this.o.periodMs / 2, () => this.renew(this.o.periodMs / 2));
    if (out === 'error') {
      const next = Math.max(Math.min(MIN_RENEW_MS, this.o.periodMs / 10), lastDelayMs / 2);
      return this.later(next, () => this.renew(next));
    }
    // Lease conflict: stop the listener, then start over as at host start.
    this.leaseId = null;
    this.o.onReleased('lost');
    await this.attempt();
  }
}
