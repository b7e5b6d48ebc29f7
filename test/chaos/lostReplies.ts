// Issue 20's faults: indeterminate writes. `lost_<kind>`: a write of that statement kind commits but its reply
// never arrives — the instance's TCP proxy forwards the request, drops the server's answer once it shows the
// write was made, then resets the connection or holds it silent until the client's deadline fires (pgWire.ts,
// tcpProxy.ts). `complete_stall`: the in-flight intents' rows are locked from another connection for longer than
// the settle window, so the leader's completion writes stall (the lease row is not locked: renewals go on).
import pg from 'pg';
import type { ChaosCluster, ChaosDb, Slot } from './cluster.js';
import type { StatementKind } from './pgWire.js';
import { sleep, type Rng } from './rng.js';
import { ReplyTrap, type LossEnd, type TcpProxy } from './tcpProxy.js';

export const LOST_REPLY_KINDS = ['lost_acquire', 'lost_renew', 'lost_start', 'lost_complete', 'lost_release', 'lost_orphans'] as const;
export type LostReplyKind = (typeof LOST_REPLY_KINDS)[number];
/** Drawn in normal campaigns, not in `--ci` (until the executor handles them; `--faults` selects them). */
export const INDETERMINATE_KINDS = [...LOST_REPLY_KINDS, 'complete_stall'] as const;

export const INDETERMINATE_DESCRIPTIONS: Record<(typeof INDETERMINATE_KINDS)[number], string> = {
  lost_acquire: 'a winning acquire commits, its reply is lost (any instance; provoked by a lost renew reply on the leader, which steps down)',
  lost_renew: "the leader's renew commits, its reply is lost",
  lost_start: "the leader's fenced start commits, its reply is lost",
  lost_complete: "the leader's fenced completion commits, its reply is lost",
  lost_release: "the leader's release commits, its reply is lost (provoked by a lost renew reply)",
  lost_orphans: "the new leader's orphan recovery commits, its COMMIT's reply is lost (provoked by a lost renew reply on the leader)",
  complete_stall: 'every intent in flight locked from another connection for settle window + 0.3–1 s: completion writes stall (the lease row is not locked)',
};

/** What was lost, where, and when the connection ended (the client knew then). */
export interface LostReplyRecord { statement: StatementKind; end: LossEnd; holderId: string; at: number; endedAt: number }

const statementOf = (k: LostReplyKind) => k.slice('lost_'.length) as StatementKind;

/** Kinds that happen only after a step-down: the leader's lost renew reply provokes one. */
const PROVOKED = new Set<StatementKind>(['acquire', 'release', 'orphans']);

/** Arm the trap (on every instance for acquire / orphan recovery: whoever leads next), wait ≤ `waitMs` for it. */
export async function loseReply(kind: LostReplyKind, cluster: ChaosCluster, leader: Slot, r: Rng, waitMs: number):
Promise<{ record: LostReplyRecord; slot: Slot } | null> {
  const statement = statementOf(kind);
  const trap = new ReplyTrap(statement, r.chance(0.5) ? 'reset' : 'hold');
  const armed: TcpProxy[] = statement === 'acquire' || statement === 'orphans' ? cluster.slots.map((s) => s.proxy) : [leader.proxy];
  for (const p of armed) p.arm(trap);
  const provoke = PROVOKED.has(statement) ? new ReplyTrap('renew', 'reset') : null;
  if (provoke) leader.proxy.arm(provoke);
  try {
    const lost = await Promise.race([trap.done, sleep(waitMs).then(() => null)]);
    if (!lost) return null;
    const slot = cluster.slots.find((s) => s.proxy === lost.proxy)!;
    return { record: { statement, end: lost.end, holderId: slot.holderId, at: lost.at, endedAt: lost.endedAt }, slot };
  } finally {
    for (const p of armed) p.disarm(trap);
    if (provoke) leader.proxy.disarm(provoke);
  }
}

/** For `ms`, on a connection of its own, lock every intent row in flight (re-read every 20 ms, so the calls started
 *  meanwhile are caught before their completion is written; one blocked completion holds up the ones serialised
 *  behind it); how many intents it locked. */
export async function stallCompletions(db: ChaosDb, ms: number): Promise<number> {
  const c = new pg.Client({ connectionString: db.url, connectionTimeoutMillis: 5_000, application_name: 'chaos-stall' });
  c.on('error', () => {});
  await c.connect();
  const locked = new Set<string>();
  try {
    await c.query('BEGIN');
    for (const end = Date.now() + ms; Date.now() < end; await sleep(20)) {
      const r = await c.query<{ intent_id: string }>(`SELECT intent_id FROM submission_intents WHERE status = 'in_flight' FOR UPDATE`);
      for (const row of r.rows) locked.add(row.intent_id);
    }
    await c.query('ROLLBACK');
  } finally {
    await c.end().catch(() => {});
  }
  return locked.size;
}
