// Reads the hosts' pino logs for timer evidence: every executorTimer invocation (tick_summary: end time and
// duration, so its interval; its role, epoch and starts), listener-lock transitions and each lock operation's send
// time, by holder id. Used to assert that one instance at a time invokes the timer and when the lock could move.
import { existsSync, readFileSync } from 'node:fs';

export interface Invocation { holderId: string; startMs: number; endMs: number; role: string; leaseEpoch: number | null; started: number;
  /** The partition of the timer (a partitioned host's lines carry it), else null. */
  partition: number | null }
export interface LockEvent { holderId: string; atMs: number; event: 'listener_lock_acquired' | 'listener_lock_released' }

function records(file: string): Record<string, unknown>[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8').split('\n').filter((l) => l.startsWith('{')).flatMap((l) => {
    try {
      return [JSON.parse(l) as Record<string, unknown>];
    } catch {
      return []; // a line cut by SIGKILL
    }
  });
}

export function timerInvocations(files: string[]): Invocation[] {
  return files.flatMap(records).filter((r) => r.event === 'tick_summary').map((r) => {
    const endMs = Date.parse(String(r.time));
    return { holderId: String(r.holder_id), endMs, startMs: endMs - Number(r.durationMs ?? 0), role: String(r.role),
      leaseEpoch: r.leaseEpoch == null ? null : Number(r.leaseEpoch), started: Number(r.started ?? 0),
      partition: r.partition == null ? null : Number(r.partition) };
  }).sort((a, b) => a.startMs - b.startMs);
}

export function lockEvents(files: string[]): LockEvent[] {
  return files.flatMap(records).filter((r) => r.event === 'listener_lock_acquired' || r.event === 'listener_lock_released')
    .map((r) => ({ holderId: String(r.holder_id), atMs: Date.parse(String(r.time)), event: r.event as LockEvent['event'] }))
    .sort((a, b) => a.atMs - b.atMs);
}

export interface LockOp { holderId: string; op: 'acquire' | 'renew'; outcome: string; sentAtMs: number; atMs: number }

/** Every acquire attempt and renewal of the listener locks (listener_lock_op, LOG_LEVEL=debug): when each was sent
 *  and when its outcome was logged, by holder. */
export function lockOps(files: string[]): LockOp[] {
  return files.flatMap(records).filter((r) => r.event === 'listener_lock_op').map((r) => ({
    holderId: String(r.holder_id), op: r.op as LockOp['op'], outcome: String(r.outcome), sentAtMs: Date.parse(String(r.sent_at)),
    atMs: Date.parse(String(r.time)),
  })).sort((a, b) => a.sentAtMs - b.sentAtMs);
}

/** Pairs of invocations by different holders whose intervals overlap (must be empty in singleton mode). */
export function overlappingInvocations(inv: Invocation[]): [Invocation, Invocation][] {
  const out: [Invocation, Invocation][] = [];
  for (let i = 0; i < inv.length; i++) {
    for (let j = i + 1; j < inv.length && inv[j]!.startMs < inv[i]!.endMs; j++) {
      if (inv[j]!.holderId !== inv[i]!.holderId) out.push([inv[i]!, inv[j]!]);
    }
  }
  return out;
}
