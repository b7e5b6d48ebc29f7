// Stalls of this process (a GC pause, SIGSTOP, a starved event loop) while provider calls are out, seen as a late
// heartbeat. A stall that ends before a call's timer fires leaves the timer on time: the call timed out, yet it ran
// for a fraction of its timeout, and that timeout says nothing about the provider (it must not open the breaker).
// The beat runs only while some call is watched (no timer otherwise); the last MAX_STALLS stalls are kept.
import type { Clock } from '../lease/clock.js';

/** Heartbeat period while calls are out. */
const BEAT_MS = 50;
/** A beat later than this (beyond its period) records a stall. */
const MIN_STALL_MS = 200;
const MAX_STALLS = 32;

export class StallWatch {
  private watchers = 0;
  private timer: ReturnType<typeof setInterval> | null = null;
  private lastBeat = 0;
  /** [from, to] in monotonic ms, oldest first. */
  private stalls: Array<[number, number]> = [];

  constructor(private readonly clock: Clock) {}

  /** Watch while a call is out; the returned function ends this watch (the beat stops with the last one). */
  watch(): () => void {
    if (this.watchers++ === 0) {
      this.lastBeat = this.clock.nowMs();
      this.timer = setInterval(() => this.beat(), BEAT_MS);
      this.timer.unref?.();
    }
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      if (--this.watchers > 0) return;
      this.beat();
      clearInterval(this.timer!);
      this.timer = null;
    };
  }

  /** Milliseconds of [from, to] during which this process was stalled, a stall still open at `to` included. */
  stalledMs(from: number, to: number): number {
    const open: Array<[number, number]> = this.timer && this.late(to) ? [[this.lastBeat + BEAT_MS, to]] : [];
    let ms = 0;
    for (const [a, b] of [...this.stalls, ...open]) ms += Math.max(0, Math.min(b, to) - Math.max(a, from));
    return ms;
  }

  private late(now: number): boolean {
    return now - this.lastBeat - BEAT_MS >= MIN_STALL_MS;
  }

  private beat(): void {
    const now = this.clock.nowMs();
    if (this.late(now)) {
      this.stalls.push([this.lastBeat + BEAT_MS, now]);
      if (this.stalls.length > MAX_STALLS) this.stalls.shift();
    }
    this.lastBeat = now;
  }
}
