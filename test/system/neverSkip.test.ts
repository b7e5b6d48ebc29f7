// Refresh never skips an intent: (a) a writer whose transaction commits late with an older
// last_modified_at; (b) 1,000 intents sharing one timestamp with a refresh page of 100.
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { startRecordingProvider, type RecordingProvider } from '../support/recordingProvider.js';
import { runTicks, startInstances, submit, type TestInstance } from '../support/instances.js';
import { PG_TEST_URL } from '../support/pgServer.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
// Raw SQL below is PostgreSQL text; the SQL Server variant of these arrangements lives with its harness.
const pgDialects = dialects.filter((d) => d.name !== 'mssql');

describe.each(pgDialects)('never skip: $name', (dialect) => {
  const skip = dialect.unavailable();
  let ctx: DialectContext;
  let provider: RecordingProvider;
  beforeEach(async (t) => {
    if (skip) return t.skip(skip);
    ctx = await dialect.createContext();
    provider = await startRecordingProvider();
  });
  afterEach(async () => {
    await provider?.close();
    await ctx?.close();
  });

  it('1,000 intents inserted by one statement (one timestamp), refresh page 100: each executed exactly once', async () => {
    const [leader] = await startInstances(ctx, 1, { providerUrl: provider.url, pageSize: 100, concurrency: 32, leaseMs: 5_000 });
    expect((await leader!.executor.tick(50)).role).toBe('leader'); // schedule built while the table is empty
    await ctx.sql(`INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts,
        next_attempt_at, created_at, last_modified_at)
      SELECT gen_random_uuid(), repeat('0', 64), '{"provider":{"url":null},"payload":{},"retry":{"maxAttempts":3,"baseDelayMs":10,"maxDelayMs":50}}',
             'scheduled', 0, 3, now(), now(), now() FROM generate_series(1, 1000)`);
    const distinct = await ctx.sql<{ n: number }>('SELECT count(DISTINCT last_modified_at)::int AS n FROM submission_intents');
    expect(distinct[0]!.n).toBe(1);
    await runTicks([leader!], async () => provider.calls.length >= 1000 &&
      (await ctx.sql<{ n: number }>(`SELECT count(*)::int AS n FROM submission_intents WHERE status = 'succeeded'`))[0]!.n === 1000, 60_000, 1_000);
    expect(new Set(provider.calls.map((c) => c.intentId)).size).toBe(1000);
    const notOk = await ctx.sql(`SELECT outcome, error, duration_ms FROM submission_attempts WHERE outcome <> 'succeeded' LIMIT 5`);
    expect(notOk).toEqual([]);
    expect(provider.calls).toHaveLength(1000);
    const attempts = await ctx.sql<{ n: number }>('SELECT count(*)::int AS n FROM submission_attempts');
    expect(attempts[0]!.n).toBe(1000);
    // Refresh terminates: a tick with nothing new reads only the unsettled window, and ends.
    const idle = await leader!.executor.tick(300);
    expect(idle.stopReason).toBe('deadline');
  });
});

describe.each(dialects.filter((d) => d.name === 'postgres'))('never skip, late commit: $name', (dialect) => {
  const skip = dialect.unavailable();
  let ctx: DialectContext;
  let provider: RecordingProvider;
  beforeEach(async (t) => {
    if (skip) return t.skip(skip);
    ctx = await dialect.createContext();
    provider = await startRecordingProvider();
  });
  afterEach(async () => {
    await provider?.close();
    await ctx?.close();
  });

  /** Reschedule `intentId` to now in a transaction that stays open `holdMs` before committing. */
  async function lateWriter(intentId: string, holdMs: number): Promise<void> {
    const schema = (await ctx.sql<{ s: string }>('SELECT current_schema() AS s'))[0]!.s;
    const c = new pg.Client({ connectionString: PG_TEST_URL, options: `-c search_path=${schema}` });
    await c.connect();
    try {
      await c.query('BEGIN');
      await c.query(`UPDATE submission_intents SET next_attempt_at = clock_timestamp(), last_modified_at = clock_timestamp()
                      WHERE intent_id = $1`, [intentId]);
      await sleep(holdMs);
      await c.query('COMMIT');
    } finally {
      await c.end();
    }
  }

  async function scenario(instances: TestInstance[], graceOk: boolean) {
    const [leader] = instances;
    const late = await submit(leader!.stores, { late: true }, { notBefore: new Date(Date.now() + 3600_000) });
    expect((await leader!.executor.tick(50)).role).toBe('leader');
    const tick = leader!.executor.tick(graceOk ? 6_000 : 4_000);
    const writer = lateWriter(late.intentId, 2_000);
    // Other intents change and commit meanwhile, so the cursor has newer rows to advance over.
    for (let k = 0; k < 10; k++) {
      await submit(leader!.stores, { k });
      await sleep(150);
    }
    await writer;
    await tick;
    return provider.calls.some((c) => c.intentId === late.intentId);
  }

  it('a transaction held open 2 s (older timestamp, later commit) is still executed (grace 3 s)', async () => {
    const inst = await startInstances(ctx, 1, { providerUrl: provider.url, graceMs: 3_000, refreshMs: 100, leaseMs: 10_000 });
    expect(await scenario(inst, true)).toBe(true);
  });

  it('control: with no commit grace the same late commit is missed (the trap the grace closes)', async () => {
    const inst = await startInstances(ctx, 1, { providerUrl: provider.url, graceMs: 0, refreshMs: 100, leaseMs: 10_000 });
    expect(await scenario(inst, false)).toBe(false);
  });
});
