// The chaos proxy's lost-reply fault, on the PostgreSQL server: for each statement kind the write COMMITS (the
// row changed, read on a direct connection) while the client gets an error; a write that changed nothing passes
// through and the trap stays armed; `hold` ends at the client's own deadline.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openPgPool, type PgDatabase } from '../../src/store/postgres/db.js';
import { createPostgresStores } from '../../src/store/postgres/index.js';
import type { Stores } from '../../src/store/stores.js';
import { PG_TEST_URL } from '../support/pgServer.js';
import { acquireToken, LEASE_NAME, submit } from '../support/instances.js';
import { ReplyTrap, TcpProxy, type LossEnd } from './tcpProxy.js';
import type { StatementKind } from './pgWire.js';

const STATEMENT_MS = 300;
const skip = () => inject('pgUnavailable');

describe('lost reply after commit (chaos proxy, PostgreSQL server)', () => {
  const schema = `lr_${randomBytes(6).toString('hex')}`;
  let admin: PgDatabase;
  let direct: Stores; // no proxy: arrangement and inspection
  let proxy: TcpProxy;
  let proxied: Stores;

  beforeAll(async () => {
    if (skip()) return;
    admin = openPgPool({ url: PG_TEST_URL, max: 2, statementTimeoutMs: 10_000, schema });
    await admin.query(`CREATE SCHEMA ${schema}`);
    direct = createPostgresStores(admin, 'postgres');
    await direct.migrate();
    const target = new URL(PG_TEST_URL);
    proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
    await proxy.listen();
    const u = new URL(PG_TEST_URL);
    u.hostname = '127.0.0.1';
    u.port = String(proxy.port);
    proxied = createPostgresStores(openPgPool({ url: u.toString(), max: 2, statementTimeoutMs: STATEMENT_MS, schema }, () => {}), 'postgres');
  });

  afterAll(async () => {
    if (skip()) return;
    await proxied.close();
    await proxy.close();
    await admin.query(`DROP SCHEMA ${schema} CASCADE`);
    await admin.close();
  });

  const lease = async () => (await admin.query<{ holder_id: string; lease_epoch: string; live: boolean; expires_at: Date }>(
    'SELECT holder_id, lease_epoch, expires_at, expires_at > clock_timestamp() AS live FROM submission_manager_leases')).rows[0]!;
  const attempt = async (intentId: string) => (await admin.query<{ outcome: string }>(
    'SELECT outcome FROM submission_attempts WHERE intent_id = $1 ORDER BY attempt_no DESC LIMIT 1', [intentId])).rows[0]?.outcome;
  const freeLease = () => admin.query('UPDATE submission_manager_leases SET expires_at = clock_timestamp()');

  /** Run `op` through the proxy with a trap for `kind` armed: it must fail, the trap must have fired. */
  async function lost(kind: StatementKind, op: () => Promise<unknown>, end: LossEnd = 'reset') {
    const trap = new ReplyTrap(kind, end);
    proxy.arm(trap);
    try {
      const err = await op().then(() => null, (e: unknown) => e);
      expect(trap.fired, `${kind}: the trap fired`).not.toBeNull();
      expect(err, `${kind}: the client got an error`).toMatchObject({ name: 'StoreError' });
      return { err, lost: await trap.done };
    } finally {
      proxy.disarm(trap);
    }
  }

  it('acquire: a refused acquire passes through; a winning one commits while its caller gets an error', async (t) => {
    if (skip()) return t.skip(skip());
    await acquireToken(direct, 'other', 60_000);
    const trap = new ReplyTrap('acquire', 'reset');
    proxy.arm(trap);
    expect(await proxied.lease.tryAcquire(LEASE_NAME, 'mine', 60_000)).toMatchObject({ acquired: false });
    expect(trap.fired).toBeNull(); // nothing written: nothing lost
    proxy.disarm(trap);
    await freeLease();
    await lost('acquire', () => proxied.lease.tryAcquire(LEASE_NAME, 'mine', 60_000));
    expect(await lease()).toMatchObject({ holder_id: 'mine', lease_epoch: '2', live: true });
  });

  it('renew, then release: each commits while the caller gets an error', async (t) => {
    if (skip()) return t.skip(skip());
    await freeLease();
    const token = await acquireToken(direct, 'h-renew', 5_000);
    const before = (await lease()).expires_at.getTime();
    await lost('renew', () => proxied.lease.renew(token, 60_000));
    expect((await lease()).expires_at.getTime()).toBeGreaterThan(before + 30_000);
    await lost('release', () => proxied.lease.release(token));
    expect(await lease()).toMatchObject({ holder_id: 'h-renew', live: false });
    const events = await direct.lease.listEvents(LEASE_NAME);
    expect(events.at(-1)).toMatchObject({ event: 'released', holderId: 'h-renew', leaseEpoch: token.leaseEpoch });
  });

  it('start, complete and orphan recovery (at its COMMIT): each commits while the caller gets an error', async (t) => {
    if (skip()) return t.skip(skip());
    await freeLease();
    const token = await acquireToken(direct, 'h-exec', 60_000);
    const a = await submit(direct);
    await lost('start', () => proxied.execution.fencedStartAttempts(token, [{ intentId: a.intentId, expectedAttemptCount: 0 }]));
    expect(await attempt(a.intentId)).toBe('started');
    await lost('complete', () => proxied.execution.fencedCompleteAttempts(token, [{ intentId: a.intentId, attemptNo: 1, outcome: 'succeeded',
      httpStatus: 200, error: null, durationMs: 5, next: { status: 'succeeded' } }]));
    expect(await attempt(a.intentId)).toBe('succeeded');
    // An attempt left open by epoch n, recovered by epoch n + 1 through the proxy.
    const b = await submit(direct);
    expect(await direct.execution.fencedStartAttempts(token, [{ intentId: b.intentId, expectedAttemptCount: 0 }])).toMatchObject({ kind: 'ok' });
    await freeLease();
    const next = await acquireToken(direct, 'h-next', 60_000);
    await lost('orphans', () => proxied.execution.fencedRecoverOrphans(next));
    expect(await attempt(b.intentId)).toBe('abandoned');
  });

  it('hold: the connection stays silent until the client deadline destroys it; the write committed', async (t) => {
    if (skip()) return t.skip(skip());
    await freeLease();
    const token = await acquireToken(direct, 'h-hold', 5_000);
    const before = (await lease()).expires_at.getTime();
    const { err, lost: l } = await lost('renew', () => proxied.lease.renew(token, 60_000), 'hold');
    expect(err).toMatchObject({ code: 'CLIENT_DEADLINE' });
    expect(l.endedAt - l.at).toBeGreaterThanOrEqual(STATEMENT_MS); // ended by the client, not the proxy
    expect((await lease()).expires_at.getTime()).toBeGreaterThan(before + 30_000);
    // The pool recovers on a fresh connection.
    expect(await proxied.lease.renew(token, 60_000)).not.toBeNull();
  });
});
