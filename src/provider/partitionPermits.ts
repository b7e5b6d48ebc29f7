// One partition's way to the process's guard: the guard's limits (its share, breaker, holds) plus the partition's own
// part of the in-flight cap. A process's share is the sum of the parts of the partitions it leads (guardShare.ts);
// pooled without this, one partition with a backlog takes every permit as each call ends (its batch is woken by its
// own completions) while a partition just led waits for a refresh step to ask again, and starves: a new leader of a
// killed instance's partition started nothing for over a lease. With it, each partition sends at most its own part
// (at least 1; 0 = no cap of its own), and the process's total stays within its share as before.
import type { ProviderResult } from './provider.js';
import type { Grant, HoldReason, ProviderGuard } from './guard.js';

/** What an executor asks of the provider limits (the guard itself, or one partition's permits of it). */
export interface ProviderPermits {
  /** Take up to `wanted` permits now (each = one call the caller may send), up to `ahead` beyond the in-flight cap
   *  (ProviderGuard.acquire: their calls wait, beginCall); `onRoom`: called back when the process's cap refused some
   *  and room may have freed since (its own part refusing: one of its own calls ends, which wakes the caller anyway). */
  acquire(wanted: number, ahead?: number, onRoom?: () => void): Grant;
  /** A permit's call goes out now, if the calls sent are within the caps; false: wait for one to end (one of its
   *  own wakes the caller's batch; `onFree` is called back when another's did, ProviderGuard.beginCall). */
  beginCall(onFree?: () => void): boolean;
  /** How many calls the caps let out at once now (the partition's own part, else the process's; 0: no cap). */
  callLimit(): number;
  /** A rate limit paces the calls: nothing is started ahead of a free call slot (ProviderGuard.paced). */
  paced(): boolean;
  /** Give back permits that were not used (taken at `grantedAtMs`, monotonic, when known; `begun`: after beginCall). */
  release(unused: number, grantedAtMs?: number, begun?: boolean): void;
  /** A sent call whose failure says nothing about the provider (this process stalled past its timeout). */
  onInconclusive(grantedAtMs?: number): void;
  /** The outcome of a call that was sent. */
  onResult(r: ProviderResult, grantedAtMs?: number): void;
  /** Leadership changed: take the share in force now. */
  shareChanged(): void;
  /** What holds a permit taken at `grantedAtMs` from being used now (ProviderGuard.holdNow), asked without taking anything. */
  holdNow(grantedAtMs?: number): HoldReason | null;
}

/** Partition permits of `guard`: at most `cap()` of this partition's calls in flight at once (0: no cap of its own). */
export function partitionPermits(guard: ProviderGuard, cap: () => number): ProviderPermits & { readonly inFlight: number } {
  let out = 0; // permits held (sent or waiting)
  let sent = 0; // of them, calls sent
  return {
    get inFlight() { return out; },
    acquire(wanted, ahead = 0, onRoom) {
      const c = cap();
      const room = c > 0 ? Math.max(0, c + ahead - out) : wanted;
      if (room >= wanted) {
        const g = guard.acquire(wanted, ahead, onRoom);
        out += g.granted;
        return g;
      }
      // Its own part is the limit: the rest is held back until one of its own calls ends (that wakes its batch).
      const held = guard.holdBack(wanted - room, 'in_flight');
      if (room === 0) return held;
      const g = guard.acquire(room, ahead, onRoom);
      out += g.granted;
      return g.heldBy !== null ? g : { granted: g.granted, heldBy: 'in_flight', retryAtMs: null };
    },
    callLimit() {
      const c = cap();
      return c > 0 ? c : guard.callLimit();
    },
    beginCall(onFree) {
      const c = cap();
      if ((c > 0 && sent >= c) || !guard.beginCall(onFree)) return false;
      sent += 1;
      return true;
    },
    paced: () => guard.paced(),
    release(unused, grantedAtMs, begun = false) {
      if (unused <= 0) return;
      out = Math.max(0, out - unused);
      if (begun) sent = Math.max(0, sent - unused);
      guard.release(unused, grantedAtMs, begun);
    },
    onInconclusive(grantedAtMs) {
      out = Math.max(0, out - 1);
      sent = Math.max(0, sent - 1);
      guard.onInconclusive(grantedAtMs);
    },
    onResult(r, grantedAtMs) {
      out = Math.max(0, out - 1);
      sent = Math.max(0, sent - 1);
      guard.onResult(r, grantedAtMs);
    },
    shareChanged: () => guard.shareChanged(),
    holdNow: (grantedAtMs) => guard.holdNow(grantedAtMs),
  };
}
