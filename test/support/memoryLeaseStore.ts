// An in-memory LeaseStore for unit tests of the lease algorithm. It follows the port's doc comments
// (src/store/ports.ts) exactly: acquire iff the row is missing or expired (epoch + 1, 1 on insert, an
// `acquired` event), renew only by (holder, epoch) before expiry (epoch unchanged), release expires the row
// in place (never deletes it, a `released` event). Every decision uses the store's own "database time",
// which is independent of the instance's monotonic clock: by default a manual clock the test moves with
// advanceDb()/setDbTime(); or a `now` function plus an offset, so tests can skew the two on purpose.
// Hooks simulate latency (advance the FakeClock inside a call) and failures (throw a StoreError).
import type { AcquireOutcome, LeaseEvent, LeaseRow, LeaseStore, LeaseToken } from '../../src/store/ports.js';

export type LeaseOp = 'get' | 'tryAcquire' | 'renew' | 'release' | 'listEvents';

export interface MemoryLeaseStoreOptions {
  /** Base of database time in epoch ms (default: a manual clock starting at `startMs`). */
  now?: () => number;
  /** Start of the manual database clock (default 2030-01-01T00:00:00Z). Ignored when `now` is given. */
  startMs?: number;
}

interface StoredRow {
  leaseName: string;
  holderId: string;
  leaseEpoch: number;
  acquiredAt: number;
  renewedAt: number;
  expiresAt: number;
}

export class MemoryLeaseStore implements LeaseStore {
  private readonly rows = new Map<string, StoredRow>();
  private readonly events: LeaseEvent[] = [];
  private seq = 0;
  /** Set when `now` was given; otherwise database time is `manualMs + offsetMs`. */
  private readonly base: (() => number) | null;
  private manualMs: number;
  private offsetMs = 0;
  private readonly failures = new Map<LeaseOp, unknown[]>();

  /** Every call, in order (so tests can assert the store was, or was not, asked). */
  readonly calls: LeaseOp[] = [];
  /** Runs when a call arrives, before the database decides (simulated request latency). */
  beforeDecide?: (op: LeaseOp) => void | Promise<void>;
  /** Runs after the database decided, before the caller sees the result (simulated response latency). */
  afterDecide?: (op: LeaseOp) => void | Promise<void>;

  constructor(opts: MemoryLeaseStoreOptions = {}) {
    this.base = opts.now ?? null;
    this.manualMs = opts.startMs ?? Date.UTC(2030, 0, 1);
  }

  /** Current database time (epoch ms). */
  dbNowMs(): number {
    return (this.base ? this.base() : this.manualMs) + this.offsetMs;
  }

  /** Move database time forward (or back) without touching any other clock. */
  advanceDb(ms: number): void {
    this.offsetMs += ms;
  }

  /** Set database time to `at` (keeps following `now` from there when one was given). */
  setDbTime(at: Date | number): void {
    const target = typeof at === 'number' ? at : at.getTime();
    if (this.base) {
      this.offsetMs = target - this.base();
    } else {
      this.manualMs = target;
      this.offsetMs = 0;
    }
  }

  /** The next call of `op` throws `error` (queued; one per call). */
  failNext(op: LeaseOp, error: unknown): void {
    const q = this.failures.get(op) ?? [];
    q.push(error);
    this.failures.set(op, q);
  }

  /** The raw row without going through the port (no call recorded). */
  peek(leaseName: string): LeaseRow | null {
    const r = this.rows.get(leaseName);
    return r ? this.toLease(r, this.dbNowMs()) : null;
  }

  async get(leaseName: string): Promise<LeaseRow | null> {
    return this.run('get', (now) => {
      const r = this.rows.get(leaseName);
      return r ? this.toLease(r, now) : null;
    });
  }

  async tryAcquire(leaseName: string, holderId: string, durationMs: number): Promise<AcquireOutcome> {
    return this.run('tryAcquire', (now): AcquireOutcome => {
      const current = this.rows.get(leaseName);
      if (current && current.expiresAt > now) {
        return { acquired: false, current: this.toLease(current, now), dbNow: new Date(now) };
      }
      const row: StoredRow = {
        leaseName,
        holderId,
        leaseEpoch: (current?.leaseEpoch ?? 0) + 1,
        acquiredAt: now,
        renewedAt: now,
        expiresAt: now + durationMs,
      };
      this.rows.set(leaseName, row);
      this.logEvent(row, 'acquired', now);
      return { acquired: true, lease: this.toLease(row, now) };
    });
  }

  async renew(token: LeaseToken, durationMs: number): Promise<LeaseRow | null> {
    return this.run('renew', (now) => {
      const r = this.heldBy(token, now);
      if (!r) return null;
      r.renewedAt = now;
      r.expiresAt = now + durationMs;
      return this.toLease(r, now);
    });
  }

  async release(token: LeaseToken): Promise<boolean> {
    return this.run('release', (now) => {
      const r = this.heldBy(token, now);
      if (!r) return false;
      r.renewedAt = now;
      r.expiresAt = now;
      this.logEvent(r, 'released', now);
      return true;
    });
  }

  async listEvents(leaseName: string): Promise<LeaseEvent[]> {
    return this.run('listEvents', () =>
      this.events.filter((e) => e.leaseName === leaseName).map((e) => ({ ...e, at: new Date(e.at) })),
    );
  }

  private heldBy(token: LeaseToken, now: number): StoredRow | null {
    const r = this.rows.get(token.leaseName);
    if (!r || r.holderId !== token.holderId || r.leaseEpoch !== token.leaseEpoch || r.expiresAt <= now) return null;
    return r;
  }

  private logEvent(r: StoredRow, event: LeaseEvent['event'], now: number): void {
    this.events.push({ seq: ++this.seq, leaseName: r.leaseName, leaseEpoch: r.leaseEpoch, holderId: r.holderId, event, at: new Date(now) });
  }

  private async run<T>(op: LeaseOp, decide: (dbNowMs: number) => T): Promise<T> {
    this.calls.push(op);
    await this.beforeDecide?.(op);
    const failure = this.failures.get(op)?.shift();
    if (failure !== undefined) throw failure;
    const result = decide(this.dbNowMs());
    await this.afterDecide?.(op);
    return result;
  }

  private toLease(r: StoredRow, now: number): LeaseRow {
    return {
      leaseName: r.leaseName,
      holderId: r.holderId,
      leaseEpoch: r.leaseEpoch,
      acquiredAt: new Date(r.acquiredAt),
      renewedAt: new Date(r.renewedAt),
      expiresAt: new Date(r.expiresAt),
      dbNow: new Date(now),
    };
  }
}
