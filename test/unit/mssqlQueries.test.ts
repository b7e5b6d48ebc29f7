// Every SQL Server query builder, inspected without a server: only explicitly typed parameters, no JS Date
// bound as anything but DateTime2(7), no timestamp text compared with a datetime, every @name bound and
// every bound param used, SYSUTCDATETIME() as the only clock, and the locking shapes the design requires.
import { describe, expect, it } from 'vitest';
import sql from 'mssql';
import { leaseQueries } from '../../src/store/mssql/leaseStore.js';
import { intentQueries } from '../../src/store/mssql/intentStore.js';
import { executionQueries } from '../../src/store/mssql/executionQueries.js';
import { buildFencedBatch, fenceQueries } from '../../src/store/mssql/fence.js';
import { migrateQueries } from '../../src/store/mssql/migrate.js';
import { partitionQueries } from '../../src/store/mssql/partitionStore.js';
import { partitionChangeQueries } from '../../src/store/mssql/partitionChangeQueries.js';
import { partitionReassignQueries } from '../../src/store/mssql/partitionReassignQueries.js';
import { bindParams } from '../../src/store/mssql/db.js';
import { p, type SqlQuery } from '../../src/store/mssql/params.js';
import { StoreError } from '../../src/store/ports.js';
import { partitionLeaseName } from '../../src/limits.js';

const ID = '0190a5b2-7c3d-7abc-8def-0123456789ab';
const token = { leaseName: 'submission-manager-executor', holderId: 'host-1-abc', leaseEpoch: 42 };
const token3 = { ...token, leaseName: partitionLeaseName(token.leaseName, 3) };
const contract = { provider: { url: 'http://p.test' }, payload: { a: 1 }, retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2 } };
const cursor = { modifiedAt: '2026-02-02 12:00:10.1234567', intentId: ID };
/** A changer's fence: every partition lease, one token each (issue 26). */
const fence = [0, 1, 2, 3].map((k) => ({ leaseName: k === 0 ? token.leaseName : `${token.leaseName}-${k}`, holderId: 'host-1-abc~changer', leaseEpoch: 40 + k }));

/** One sample call per builder; a builder added without a sample fails the coverage test below. */
const samples: Record<string, Record<string, () => SqlQuery>> = {
  leaseQueries: {
    get: () => leaseQueries.get(token.leaseName),
    tryAcquire: () => leaseQueries.tryAcquire(token.leaseName, token.holderId, 60_000),
    renew: () => leaseQueries.renew(token, 60_000),
    release: () => leaseQueries.release(token),
    listEvents: () => leaseQueries.listEvents(token.leaseName),
    dbNow: () => leaseQueries.dbNow(),
  },
  intentQueries: {
    insert: () => intentQueries.insert({ intentId: ID, idempotencyKey: 'k', requestHash: 'a'.repeat(64), contract, maxAttempts: 3, notBefore: new Date() }),
    byKey: () => intentQueries.byKey('k'),
    get: () => intentQueries.get(ID),
    list: () => intentQueries.list({ status: 'scheduled', limit: 10, after: ID }),
    listAttempts: () => intentQueries.listAttempts(ID),
    cancel: () => intentQueries.cancel(ID),
    reschedule: () => intentQueries.reschedule(ID, new Date()),
  },
  executionQueries: {
    rebuildStart: () => executionQueries.rebuildStart(5_000),
    loadScheduled: () => executionQueries.loadScheduled(null, 100),
    refreshPage: () => executionQueries.refreshPage(cursor, 100, 5_000),
    recoverOrphans: () => executionQueries.recoverOrphans(token),
    startAttempts: () => executionQueries.startAttempts(token, [{ intentId: ID, expectedAttemptCount: 0 }]),
    completeAttempts: () => executionQueries.completeAttempts(token, [
      { intentId: ID, attemptNo: 1, outcome: 'retryable_error', httpStatus: 503, error: 'busy', durationMs: 12.4, next: { status: 'scheduled', retryDelayMs: 3_000_000_000 } },
      { intentId: ID, attemptNo: 2, outcome: 'succeeded', httpStatus: 200, error: null, durationMs: 5, next: { status: 'succeeded' } },
    ]),
  },
  fenceQueries: {
    fence: () => fenceQueries.fence(token),
    audit: () => fenceQueries.audit(token, 'start_attempts', 3),
  },
  partitionQueries: {
    record: () => partitionQueries.record(4, 'host-1-abc'),
  },
  partitionChangeQueries: {
    readLayout: () => partitionChangeQueries.readLayout(),
    requestChange: () => partitionChangeQueries.requestChange(8, 'ops-admin', ID),
    listChanges: () => partitionChangeQueries.listChanges(20),
    getChange: () => partitionChangeQueries.getChange(ID),
    claimChange: () => partitionChangeQueries.claimChange(fence, ID),
    switchCount: () => partitionChangeQueries.switchCount(fence, ID),
    moveIntents: () => partitionChangeQueries.moveIntents(fence, ID, [{ intentId: ID, partition: 5 }], { scanCursor: ID, scanDone: false }),
    completeChange: () => partitionChangeQueries.completeChange(fence, ID),
  },
  partitionReassignQueries: {
    listForReassign: () => partitionReassignQueries.listForReassign({ after: ID, limit: 500, modifiedSince: new Date(), scope: 'open' }),
    prepareBatch: () => partitionReassignQueries.prepareBatch(ID, { limit: 10_000, horizon: new Date() }),
  },
  migrateQueries: {
    lock: () => migrateQueries.lock(30_000),
    applied: () => migrateQueries.applied(),
    version: () => migrateQueries.version(),
    record: () => migrateQueries.record({ id: 1, name: 'initial', sql: '' }),
  },
};
const modules: Record<string, Record<string, unknown>> = {
  leaseQueries, intentQueries, executionQueries, fenceQueries, migrateQueries, partitionQueries, partitionChangeQueries, partitionReassignQueries,
};
const all: [string, SqlQuery][] = Object.entries(samples).flatMap(([m, fns]) => Object.entries(fns).map(([n, f]) => [`${m}.${n}`, f()] as [string, SqlQuery]));

const ALLOWED_TYPES = new Map<unknown, string>([
  [sql.VarChar, 'VarChar'], [sql.NVarChar, 'NVarChar'], [sql.Char, 'Char'], [sql.Int, 'Int'], [sql.SmallInt, 'SmallInt'], [sql.BigInt, 'BigInt'], [sql.DateTime2, 'DateTime2'],
]);
const TIMESTAMP_TEXT = /^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}/;
/** SQL with string literals and comments blanked, so @names and keywords are found only in code. */
const code = (text: string) => text.replace(/'(?:[^']|'')*'/g, "''").replace(/--.*$/gm, '').replace(/\/\*[\s\S]*?\*\//g, '');
const declared = (text: string) => new Set([...code(text).matchAll(/\bDECLARE\s+@(\w+)/gi)].map((m) => m[1]!.toLowerCase()));
const PROC_ARGS = new Set(['resource', 'lockmode', 'lockowner', 'locktimeout']); // sp_getapplock's named arguments
const referenced = (text: string) => new Set([...code(text).matchAll(/(?<![@\w])@(\w+)/g)].map((m) => m[1]!.toLowerCase()));

describe('mssql query builders: typed parameters', () => {
  it('every builder has a sample here', () => {
    for (const [m, mod] of Object.entries(modules)) {
      expect(Object.keys(samples[m]!).sort(), m).toEqual(Object.keys(mod).filter((k) => typeof mod[k] === 'function').sort());
    }
  });

  it('intentQueries.insert binds the partition (int), the hash (bigint, unsigned 32-bit) and the partition key (nvarchar(256): 128 code points); absent: null', () => {
    const insert = (extra: object) => intentQueries.insert({ intentId: ID, idempotencyKey: null, requestHash: 'a'.repeat(64), contract, maxAttempts: 3,
      notBefore: null, ...extra });
    const bound = (q: SqlQuery) => Object.fromEntries(q.params.filter((x) => x.name.startsWith('partition_'))
      .map((x) => [x.name, { type: x.type?.type, length: (x.type as { length?: number }).length, value: x.value }]));
    expect(bound(insert({ partition: 3, partitionHash: 4_294_967_295, partitionKey: 'tenant-😀' }))).toEqual({
      partition_no: { type: sql.Int, length: undefined, value: 3 }, partition_hash: { type: sql.BigInt, length: undefined, value: 4_294_967_295 },
      partition_key: { type: sql.NVarChar, length: 256, value: 'tenant-😀' } });
    expect(bound(insert({}))).toMatchObject({ partition_no: { value: null }, partition_hash: { value: null }, partition_key: { value: null } });
    expect(() => insert({ partitionKey: 'k'.repeat(257) })).toThrow(StoreError);
    expect(() => insert({ partitionHash: -1 })).toThrow(StoreError);
    expect(() => insert({ partitionHash: 2 ** 32 })).toThrow(StoreError);
  });

  it.each(all)('%s binds only explicitly typed parameters', (_name, q) => {
    const names = q.params.map((x) => x.name);
    expect(new Set(names).size).toBe(names.length);
    for (const x of q.params) {
      const kind = ALLOWED_TYPES.get(x.type?.type);
      expect(kind, `@${x.name} has an allowed explicit type`).toBeDefined();
      if (kind === 'VarChar' || kind === 'NVarChar' || kind === 'Char') expect((x.type as { length?: number }).length, `@${x.name} length`).toBeGreaterThan(0);
      if (kind === 'DateTime2') {
        expect((x.type as { scale?: number }).scale, `@${x.name} is DateTime2(7)`).toBe(7);
        expect(x.value === null || x.value instanceof Date).toBe(true);
      }
      if (x.value instanceof Date) expect(kind, `Date @${x.name} bound as DateTime2(7)`).toBe('DateTime2');
      if (typeof x.value === 'number') expect(['Int', 'SmallInt', 'BigInt']).toContain(kind);
      if (typeof x.value === 'string' && TIMESTAMP_TEXT.test(x.value)) {
        // Timestamp text is only ever the cursor, cast back server-side at full precision.
        expect(kind).toBe('VarChar');
        expect((x.type as { length?: number }).length).toBe(27);
        const uses = [...q.text.matchAll(new RegExp(`@${x.name}\\b`, 'g'))].length;
        const casts = [...q.text.matchAll(new RegExp(`CONVERT\\(datetime2\\(7\\), @${x.name}, 121\\)`, 'g'))].length;
        expect(casts).toBe(uses);
      }
    }
  });

  it.each(all)('%s: every @name in the text is bound or declared, and every bound param is used', (_name, q) => {
    const bound = new Set(q.params.map((x) => x.name.toLowerCase()));
    const locals = declared(q.text);
    const used = referenced(q.text);
    for (const n of used) expect(bound.has(n) || locals.has(n) || PROC_ARGS.has(n), `@${n} is bound or declared`).toBe(true);
    for (const n of bound) expect(used.has(n), `@${n} is used`).toBe(true);
    for (const n of locals) expect(bound.has(n), `@${n} is not both a local and a param`).toBe(false);
  });

  it.each(all)('%s: SYSUTCDATETIME() is the only clock; no MERGE', (_name, q) => {
    const c = code(q.text);
    expect(c).not.toMatch(/\b(GETDATE|GETUTCDATE|SYSDATETIME|SYSDATETIMEOFFSET|CURRENT_TIMESTAMP)\b/i);
    expect(c).not.toMatch(/\bMERGE\b/i);
    expect(c).not.toMatch(/\bDELETE\b/i);
  });

  it('the runner binds exactly the declared types (what mssql sends to tedious)', () => {
    for (const [, q] of all) {
      const r = bindParams(new sql.Request(), q);
      for (const x of q.params) {
        const bound = r.parameters[x.name]!;
        expect(bound.type).toBe(x.type.type);
        if (x.type.type === sql.DateTime2) expect(bound.scale).toBe(7);
      }
    }
  });
});

describe('mssql query builders: values are validated like the columns would', () => {
  it('ids are canonical lower-case UUID text; anything else is a fatal StoreError (like PostgreSQL uuid input)', () => {
    expect(p.uuid('x', ID.toUpperCase()).value).toBe(ID);
    expect(() => intentQueries.get('not-a-uuid')).toThrow(StoreError);
    expect(() => executionQueries.startAttempts(token, [{ intentId: `${ID}x`, expectedAttemptCount: 0 }])).toThrow(/UUID/);
  });
  it('a JS Date ISO string is never accepted as the cursor', () => {
    expect(() => executionQueries.refreshPage({ ...cursor, modifiedAt: new Date().toISOString() }, 10, 0)).toThrow(/cursor/);
    expect(() => executionQueries.refreshPage({ ...cursor, modifiedAt: '2026-02-02T12:00:10.1234567' }, 10, 0)).toThrow(/cursor/);
    expect(() => executionQueries.refreshPage({ ...cursor, modifiedAt: '2026-02-02 12:00:10.12345678' }, 10, 0)).toThrow(/cursor/);
  });
  it('lengths and integer ranges are checked before sending', () => {
    expect(() => leaseQueries.get('x'.repeat(65))).toThrow(/longer than 64/);
    expect(() => leaseQueries.renew(token, 2 ** 31)).toThrow(/integer/);
    expect(() => p.bigint('e', 1.5)).toThrow(/integer/);
    expect(() => p.datetime2('d', new Date(Number.NaN))).toThrow(/valid Date/);
  });
});

describe('mssql query shapes', () => {
  const t = (f: () => SqlQuery) => f().text;

  it('tryAcquire: one XACT_ABORT transaction, UPDATE then INSERT … WHERE NOT EXISTS, both UPDLOCK+SERIALIZABLE, with OUTPUT', () => {
    const q = t(samples.leaseQueries!.tryAcquire!);
    expect(q).toMatch(/SET XACT_ABORT ON;[\s\S]*DECLARE @now datetime2\(7\);[\s\S]*BEGIN TRANSACTION;/);
    const update = q.indexOf('UPDATE submission_manager_leases WITH (UPDLOCK, SERIALIZABLE)');
    const insert = q.indexOf('INSERT INTO submission_manager_leases');
    const event = q.indexOf('INSERT INTO submission_manager_lease_events');
    const commit = q.indexOf('COMMIT TRANSACTION');
    expect(update).toBeGreaterThan(0);
    expect(insert).toBeGreaterThan(update);
    expect(event).toBeGreaterThan(insert);
    expect(commit).toBeGreaterThan(event);
    expect(q).toMatch(/lease_epoch = lease_epoch \+ 1[\s\S]*OUTPUT[\s\S]*WHERE lease_name = @lease_name AND expires_at <= @now/);
    expect(q).toMatch(/WHERE NOT EXISTS \(SELECT 1 FROM submission_manager_leases WITH \(UPDLOCK, SERIALIZABLE\) WHERE lease_name = @lease_name\)/);
    // The loser reads the current row inside the transaction; every result is selected after COMMIT.
    expect(q.slice(commit)).toMatch(/SELECT acquired, [\s\S]*@now AS db_now FROM @out/);
    expect(q.slice(0, commit)).not.toMatch(/AS db_now/);
  });

  // Issue 20 item 9: SYSUTCDATETIME() is fixed when a statement starts, so the time must be read in a statement after
  // the one that waits for the lock (PostgreSQL's clock_timestamp() is read after the row lock).
  it.each([
    ['tryAcquire', 'UPDLOCK'], ['renew', 'XLOCK'], ['release', 'XLOCK'],
  ] as const)('%s: locks the lease row WITH (%s, HOLDLOCK, ROWLOCK) inside the transaction first, reads the time only after it', (name, hint) => {
    const q = t(samples.leaseQueries![name]!);
    const begin = q.indexOf('BEGIN TRANSACTION;');
    const lock = q.indexOf(`SELECT @locked = lease_epoch FROM submission_manager_leases WITH (${hint}, HOLDLOCK, ROWLOCK)\n WHERE lease_name = @lease_name;`);
    const now = q.indexOf('SET @now = SYSUTCDATETIME();');
    expect(begin).toBeGreaterThan(0);
    expect(lock).toBeGreaterThan(begin);
    expect(now).toBeGreaterThan(lock);
    expect(q.match(/SYSUTCDATETIME\(\)/g)).toHaveLength(1); // the only clock read, after the lock
    expect(q.indexOf('@now', now + 10)).toBeGreaterThan(now); // every use of @now follows it
    expect(q.slice(0, now)).not.toMatch(/@now\b(?! datetime2)/);
  });

  it('recoverOrphans: attempts closed on intents that moved on count as written (an audit row even when no intent moved)', () => {
    const q = t(samples.executionQueries!.recoverOrphans!);
    expect(q).toMatch(/i\.status <> 'in_flight';\nSET @settled = @@ROWCOUNT;/);
    expect(q).toMatch(/SET @recovered = @@ROWCOUNT;[\s\S]*SET @rows_written = @recovered \+ @settled;/);
    expect(q).toMatch(/SELECT @recovered AS recovered;/);
  });

  it('fence: the lease row is read WITH (HOLDLOCK, ROWLOCK) by (name, holder, epoch); expiry is checked in a later statement', () => {
    for (const q of [t(samples.fenceQueries!.fence!), t(samples.executionQueries!.startAttempts!)]) {
      const read = q.indexOf('SELECT @fence_expires = expires_at FROM submission_manager_leases WITH (HOLDLOCK, ROWLOCK)');
      const check = q.indexOf('@fence_expires > SYSUTCDATETIME()');
      expect(read).toBeGreaterThan(0);
      expect(check).toBeGreaterThan(read);
      expect(q.slice(read, check)).toMatch(/lease_epoch = @fence_lease_epoch;\n/); // a statement boundary in between
      expect(q.slice(read, check)).not.toMatch(/SYSUTCDATETIME/);
    }
    expect(t(samples.executionQueries!.startAttempts!)).toMatch(/IF @fence_expires IS NULL OR NOT \(@fence_expires > SYSUTCDATETIME\(\)\)\nBEGIN\n  ROLLBACK TRANSACTION;/);
  });

  it('renew is one conditional UPDATE inside its transaction, the row returned after COMMIT; release expires in place and logs, never deletes', () => {
    const renew = t(samples.leaseQueries!.renew!);
    expect(renew.match(/\bUPDATE\b/g)).toHaveLength(1);
    expect(renew).toMatch(/BEGIN TRANSACTION;[\s\S]*UPDATE[\s\S]*COMMIT TRANSACTION;\nSELECT [\s\S]*@now AS db_now FROM @out;$/);
    expect(renew).toMatch(/OUTPUT[\s\S]*INTO @out\n WHERE lease_name = @lease_name AND holder_id = @holder_id AND lease_epoch = @lease_epoch AND expires_at > @now/);
    expect(renew).not.toMatch(/lease_epoch = lease_epoch/);
    const release = t(samples.leaseQueries!.release!);
    expect(release).toMatch(/SET expires_at = @now/);
    expect(release).toMatch(/'released'/);
    expect(release).toMatch(/SET XACT_ABORT ON[\s\S]*BEGIN TRANSACTION[\s\S]*UPDATE[\s\S]*INSERT INTO submission_manager_lease_events[\s\S]*COMMIT/);
  });

  it('fenced writes: lease row read WITH (HOLDLOCK, ROWLOCK) first, audit inside, results after COMMIT', () => {
    for (const f of ['recoverOrphans', 'startAttempts', 'completeAttempts']) {
      const q = t(samples.executionQueries![f]!);
      const begin = q.indexOf('BEGIN TRANSACTION');
      const fence = q.indexOf('FROM submission_manager_leases WITH (HOLDLOCK, ROWLOCK)');
      const lost = q.indexOf('ROLLBACK TRANSACTION');
      const audit = q.indexOf('INSERT INTO submission_execution_audit');
      const commit = q.indexOf('COMMIT TRANSACTION');
      expect(q).toMatch(/^\s*SET XACT_ABORT ON;/);
      expect(begin).toBeGreaterThan(0);
      expect(fence).toBeGreaterThan(begin);
      expect(lost).toBeGreaterThan(fence);
      expect(audit).toBeGreaterThan(lost);
      expect(commit).toBeGreaterThan(audit);
      expect(q).toMatch(/holder_id = @fence_holder_id AND lease_epoch = @fence_lease_epoch;\nIF @fence_expires IS NULL OR NOT \(@fence_expires > SYSUTCDATETIME\(\)\)/);
      // Every write of the work sits between the fence and the commit.
      for (const m of q.matchAll(/\b(UPDATE|INSERT INTO) (submission_\w+|[a-z])\b/g)) {
        expect(m.index!).toBeGreaterThan(fence);
        expect(m.index!).toBeLessThan(commit);
      }
    }
    expect(t(samples.fenceQueries!.fence!)).toMatch(/WITH \(HOLDLOCK, ROWLOCK\)/);
  });

  it('batches travel as one NVarChar(MAX) JSON parameter read with OPENJSON', () => {
    const start = samples.executionQueries!.startAttempts!();
    expect(start.text).toMatch(/OPENJSON\(@batch\) WITH \(/);
    const batch = start.params.find((x) => x.name === 'batch')!;
    expect(batch.type).toEqual(sql.NVarChar(sql.MAX));
    expect(JSON.parse(batch.value as string)).toEqual([{ intentId: ID, expected: 0 }]);
    const complete = samples.executionQueries!.completeAttempts!();
    const rows = JSON.parse(complete.params.find((x) => x.name === 'batch')!.value as string);
    expect(rows[0]).toMatchObject({ ord: 0, durationMs: 12, nextStatus: 'scheduled', delayMs: 3_000_000_000 });
    expect(rows[1]).toMatchObject({ ord: 1, delayMs: null, error: null });
    // A delay beyond int milliseconds is added as seconds + remainder (DATEADD takes an int).
    expect(complete.text).toMatch(/DATEADD\(millisecond, CAST\(c\.delay_ms % 1000 AS int\), DATEADD\(second, CAST\(c\.delay_ms \/ 1000 AS int\), @now\)\)/);
  });

  it('refresh: composite cursor cast back server-side, ordered, settled flag from database time', () => {
    const q = t(samples.executionQueries!.refreshPage!);
    expect(q).toMatch(/DECLARE @t datetime2\(7\) = CONVERT\(datetime2\(7\), @cursor_modified_at, 121\)/);
    expect(q).toMatch(/WHERE partition_no = @partition_no AND last_modified_at >= @t AND \(last_modified_at > @t OR intent_id > @cursor_intent_id\)/);
    expect(q).toMatch(/ORDER BY last_modified_at, intent_id/);
    expect(q).toMatch(/last_modified_at < DATEADD\(millisecond, -@commit_grace_ms, @now\)/);
    expect(q).toMatch(/CONVERT\(char\(27\), last_modified_at, 121\) AS version/);
    expect(t(samples.executionQueries!.rebuildStart!)).toMatch(/CONVERT\(char\(27\), DATEADD\(millisecond, -@commit_grace_ms, @now\), 121\) AS cursor_text/);
  });

  it('every insert into / update of submission_intents sets last_modified_at from the database clock', () => {
    let writes = 0;
    // Except moving rows between partitions (issue 26): the port keeps last_modified_at (mssqlPartitionQueries.test.ts).
    const moves = ['partitionChangeQueries.moveIntents', 'partitionReassignQueries.prepareBatch'];
    for (const [name, q] of all.filter(([n]) => !moves.includes(n))) {
      const c = code(q.text);
      for (const m of c.matchAll(/\b(?:UPDATE (?:submission_intents|i)\b|INSERT INTO submission_intents\b)[\s\S]*?;/g)) {
        writes++;
        expect(m[0], name).toMatch(/last_modified_at/);
        // Assigned from SYSUTCDATETIME() directly, from @now (only ever SYSUTCDATETIME()), or — on updates —
        // from the database clock bumped past the previous value (CASE WHEN clock > prev THEN clock ELSE prev + 100 ns).
        for (const a of m[0].matchAll(/last_modified_at = (CASE WHEN (\S+) > (\S+) THEN (\S+) ELSE DATEADD\(nanosecond, 100, (\S+)\) END|\S+)/g)) {
          if (a[2] !== undefined) {
            expect(['SYSUTCDATETIME()', '@now']).toContain(a[2]);
            expect(a[4]).toBe(a[2]);
            expect(a[5]).toBe(a[3]);
            expect(a[3]).toMatch(/^(i\.)?last_modified_at$/);
          } else {
            expect(['SYSUTCDATETIME()', '@now,', '@now']).toContain(a[1]);
          }
        }
      }
      for (const a of c.matchAll(/(?:DECLARE|SET) @now(?: datetime2\(7\))? = ([^;]+);/g)) expect(a[1], name).toBe('SYSUTCDATETIME()');
    }
    expect(writes).toBeGreaterThanOrEqual(6);
  });

  it('idempotent insert probes the key under UPDLOCK+SERIALIZABLE in one transaction', () => {
    const q = t(samples.intentQueries!.insert!);
    expect(q).toMatch(/SET XACT_ABORT ON[\s\S]*BEGIN TRANSACTION[\s\S]*NOT EXISTS \(SELECT 1 FROM submission_intents WITH \(UPDLOCK, SERIALIZABLE\)[\s\S]*COMMIT TRANSACTION/);
  });

  it('buildFencedBatch reserves fence_* names and the audit action is a bound varchar', () => {
    const q = buildFencedBatch(token, 'probe', { declare: '', body: 'SET @rows_written = 0;', results: '', params: [] });
    expect(q.params.map((x) => x.name)).toEqual(['fence_lease_name', 'fence_holder_id', 'fence_lease_epoch', 'fence_action']);
  });
});

// Partitioned execution (issue 25): the contract suite runs only where SQL Server does, so the partition filter of
// every execution statement is pinned here too (the same guarantees as the PostgreSQL and MySQL stores).
describe('mssql execution queries: one partition each', () => {
  const completion = { intentId: ID, attemptNo: 1, outcome: 'succeeded' as const, httpStatus: 200, error: null, durationMs: 1,
    next: { status: 'succeeded' as const } };
  const cursor = { modifiedAt: '2024-01-01 00:00:00.0000000', intentId: ID };
  const built: [string, SqlQuery, number][] = [
    ['loadScheduled', executionQueries.loadScheduled(null, 10, 3), 1],
    ['refreshPage', executionQueries.refreshPage(cursor, 10, 0, 3), 1],
    // the orphans and the older-epoch attempts on intents that moved on: both of the partition
    ['recoverOrphans', executionQueries.recoverOrphans(token, 3), 2],
    ['startAttempts', executionQueries.startAttempts(token3, [{ intentId: ID, expectedAttemptCount: 0 }], 3), 1],
    // attempts closed only on the partition's intents (the intent update requires a closed attempt)
    ['completeAttempts', executionQueries.completeAttempts(token, [completion], 3), 1],
  ];
  it.each(built)('%s filters on @partition_no (smallint, the store\'s partition)', (_n, q, filters) => {
    expect(code(q.text).match(/partition_no = @partition_no/g)).toHaveLength(filters);
    expect(q.params.filter((x) => x.name === 'partition_no').map((x) => [x.type?.type, x.value])).toEqual([[sql.SmallInt, 3]]);
  });
  it('a START is held by its partition\'s pause, the cluster\'s and its lease\'s pending drain (the leader\'s rules)', () => {
    const q = executionQueries.startAttempts(token3, [{ intentId: ID, expectedAttemptCount: 0 }], 3);
    const text = code(q.text);
    expect(text).toMatch(/h\.lease_name = @fence_lease_name AND h\.status = ''/);
    expect(text).toMatch(/c\.lease_name IN \(@fence_lease_name, @cluster_control\) AND c\.paused = 1/);
    expect(text).toMatch(/\nIF @held IS NULL\nBEGIN\nUPDATE i\n/);
    expect(text).toMatch(/SELECT @held AS held;\s*$/);
    expect(q.params.find((x) => x.name === 'cluster_control')?.value).toBe('submission-manager-executor#*');
    expect(() => executionQueries.startAttempts(token, [{ intentId: ID, expectedAttemptCount: 0 }], 3)).toThrow(/not the lease name of partition 3/);
  });
  it('the partition defaults to 0 (stores.execution)', () => {
    expect(executionQueries.loadScheduled(null, 10).params.find((x) => x.name === 'partition_no')?.value).toBe(0);
  });
});
