// SQL Server OpsStore query builders, inspected without a server (the rules of mssqlQueries.test.ts, except
// that the retention purge is the one place that DELETEs): explicit parameter types, every @name bound or
// declared, SYSUTCDATETIME() as the only clock, the fence first, and the upsert without MERGE.
import { describe, expect, it } from 'vitest';
import sql from 'mssql';
import { handoverQueries } from '../../src/store/mssql/handover.js';
import { opsQueries } from '../../src/store/mssql/opsStore.js';
import { SETTLED_COUNT_CAP } from '../../src/store/opsPorts.js';
import { redriveQueries } from '../../src/store/mssql/redriveStore.js';
import { insightQueries } from '../../src/store/mssql/insightStore.js';
import type { SqlQuery } from '../../src/store/mssql/params.js';

const token = { leaseName: 'submission-manager-executor', holderId: 'host-1-abc', leaseEpoch: 42 };
const redriveSample = {
  redriveId: '01a21664-e75d-7511-bfbf-d9834bd6e04b', requestedBy: 'ops@host-1', reason: 'fixed', limit: 100,
  ids: ['01a21664-E79B-72c4-9fe0-858b2d2a3219'], failedFrom: new Date(0), failedTo: new Date(), errorContains: '503',
};
const samples: Record<string, () => SqlQuery> = {
  clusterOverview: () => opsQueries.clusterOverview(token.leaseName),
  getExecutionControl: () => opsQueries.getExecutionControl(token.leaseName),
  setPaused: () => opsQueries.setPaused(token.leaseName, true, 'admin@host-1', 'maintenance'),
  recordProviderBreaker: () => opsQueries.recordProviderBreaker(token.leaseName, 'open', 'host-1-abc', 30_000),
  recordProviderPause: () => opsQueries.recordProviderPause(token.leaseName, 5_000, 'host-1-abc'),
  getProviderHold: () => opsQueries.getProviderHold(token.leaseName),
  purgeTerminal: () => opsQueries.purgeTerminal(token, 0, 30 * 86_400_000, 1_000),
  recordMaintenance: () => opsQueries.recordMaintenance('L', 'retention', 'h', 3, 'permission denied'),
  listMaintenance: () => opsQueries.listMaintenance('L'),
  redrive: () => redriveQueries.redrive(redriveSample),
  listRedrives: () => redriveQueries.listRedrives(20),
  recentLeaseEvents: () => insightQueries.recentLeaseEvents(token.leaseName, 20),
  attemptsPerMinute: () => insightQueries.attemptsPerMinute(3_600_000),
  recentFailures: () => insightQueries.recentFailures(20),
  searchIntents: () => insightQueries.searchIntents({ intentId: null, idempotencyKey: 'k', status: 'failed', createdFrom: new Date(0), createdTo: null, before: null, limit: 25 }),
  redrivesOf: () => insightQueries.redrivesOf(redriveSample.redriveId),
  partitionStates: () => insightQueries.partitionStates([{ partition: 0, leaseName: 'L' }, { partition: 3, leaseName: 'L#3' }]),
  partitionControls: () => insightQueries.partitionControls([{ partition: 0, leaseName: 'L' }, { partition: 3, leaseName: 'L#3' }]),
};
const handoverSamples: Record<string, () => SqlQuery> = {
  requestHandover: () => handoverQueries.requestHandover(token.leaseName, '0190f5f2-1c9e-7d55-8a5b-0123456789ab', 'admin@host-1', 'deploy'),
  listHandovers: () => handoverQueries.listHandovers(token.leaseName, 20),
  completeHandover: () => handoverQueries.completeHandover(token, '0190f5f2-1c9e-7d55-8a5b-0123456789ab'),
};
const all = Object.entries({ ...samples, ...handoverSamples }).map(([n, f]) => [n, f()] as [string, SqlQuery]);

const ALLOWED = new Set<unknown>([sql.VarChar, sql.NVarChar, sql.Char, sql.Int, sql.SmallInt, sql.BigInt, sql.DateTime2]);
const code = (text: string) => text.replace(/'(?:[^']|'')*'/g, "''").replace(/--.*$/gm, '');
const declared = (text: string) => new Set([...code(text).matchAll(/\bDECLARE\s+@(\w+)/gi)].map((m) => m[1]!.toLowerCase()));
const referenced = (text: string) => new Set([...code(text).matchAll(/(?<![@\w])@(\w+)/g)].map((m) => m[1]!.toLowerCase()));

describe('mssql ops query builders', () => {
  it('every builder has a sample', () => {
    expect(Object.keys(samples).sort()).toEqual([...Object.keys(opsQueries), ...Object.keys(redriveQueries), ...Object.keys(insightQueries)].sort());
    expect(Object.keys(handoverSamples).sort()).toEqual(Object.keys(handoverQueries).sort());
  });

  it.each(['recordProviderBreaker', 'recordProviderPause'])('%s: UPDATE under UPDLOCK+SERIALIZABLE, then INSERT only when no row was updated, one transaction, no MERGE', (name) => {
    const t = code(samples[name]!().text);
    expect(t).toMatch(/BEGIN TRANSACTION;\s+UPDATE submission_manager_provider_state WITH \(UPDLOCK, SERIALIZABLE\)[\s\S]+IF @@ROWCOUNT = 0\s+INSERT INTO submission_manager_provider_state[\s\S]+COMMIT TRANSACTION;/);
    expect(t).not.toMatch(/\bMERGE\b/i);
  });

  it('requestHandover: the pending check and the insert under UPDLOCK+SERIALIZABLE in one transaction; returns the request by id', () => {
    const t = code(handoverSamples.requestHandover!().text);
    expect(t).toMatch(/BEGIN TRANSACTION;\s+SELECT TOP \(1\) @id = request_id FROM submission_manager_handover_requests WITH \(UPDLOCK, SERIALIZABLE\)/);
    expect(t.indexOf('INSERT INTO submission_manager_handover_requests')).toBeGreaterThan(t.indexOf('UPDLOCK, SERIALIZABLE'));
    expect(t).toMatch(/COMMIT TRANSACTION;\s+SELECT .* WHERE request_id = @id;/s);
  });

  it('completeHandover: fenced first (HOLDLOCK), only a pending request, stamped with the fence epoch and holder', () => {
    const t = code(handoverSamples.completeHandover!().text);
    expect(t.indexOf('WITH (HOLDLOCK, ROWLOCK)')).toBeGreaterThan(0);
    expect(t.indexOf('WITH (HOLDLOCK, ROWLOCK)')).toBeLessThan(t.indexOf('UPDATE submission_manager_handover_requests'));
    expect(t).toMatch(/completed_epoch = @fence_lease_epoch, completed_by = @fence_holder_id/);
    expect(t).toMatch(/AND lease_name = @fence_lease_name AND status = '';/); // 'pending' (literals blanked by code())
  });

  it.each(all)('%s binds only explicitly typed parameters; every @name is bound or declared and every param used', (_n, q) => {
    for (const x of q.params) expect(ALLOWED.has(x.type?.type), `@${x.name}`).toBe(true);
    const bound = new Set(q.params.map((x) => x.name.toLowerCase()));
    const locals = declared(q.text);
    for (const n of referenced(q.text)) expect(bound.has(n) || locals.has(n), `@${n} bound or declared`).toBe(true);
    for (const n of bound) expect(referenced(q.text).has(n), `@${n} used`).toBe(true);
  });

  it.each(all)('%s: SYSUTCDATETIME() is the only clock; no MERGE', (_n, q) => {
    expect(code(q.text)).not.toMatch(/\b(GETDATE|GETUTCDATE|SYSDATETIME|SYSDATETIMEOFFSET|CURRENT_TIMESTAMP|MERGE)\b/i);
  });

  it('setPaused: UPDATE then INSERT under UPDLOCK+SERIALIZABLE in one transaction; a bit from an int param', () => {
    const t = opsQueries.setPaused(token.leaseName, false, 'x', null).text;
    expect(t).toMatch(/BEGIN TRANSACTION;\s+UPDATE submission_manager_execution_control WITH \(UPDLOCK, SERIALIZABLE\)/);
    expect(t).toMatch(/IF NOT EXISTS \(SELECT 1 FROM submission_manager_execution_control WITH \(UPDLOCK, SERIALIZABLE\)/);
    expect(t).toMatch(/CAST\(@paused AS bit\)/);
    expect(opsQueries.setPaused(token.leaseName, false, 'x', null).params.find((p) => p.name === 'paused')?.value).toBe(0);
  });

  it('purgeTerminal: fenced first (HOLDLOCK), only terminal statuses, oldest first, bounded by TOP, 30 days without int overflow', () => {
    const q = opsQueries.purgeTerminal(token, 0, 30 * 86_400_000, 1_000);
    const t = code(q.text);
    expect(t.indexOf('WITH (HOLDLOCK, ROWLOCK)')).toBeGreaterThan(0);
    expect(t.indexOf('WITH (HOLDLOCK, ROWLOCK)')).toBeLessThan(t.indexOf('DELETE'));
    expect(t).toMatch(/SELECT TOP \(@limit\) intent_id FROM submission_intents WITH \(UPDLOCK, READPAST, READCOMMITTEDLOCK, ROWLOCK\)/);
    expect(t).toMatch(/ORDER BY last_modified_at, intent_id/);
    expect(q.text.match(/status IN \('succeeded', 'failed', 'cancelled'\)/g)).toHaveLength(2);
    expect(q.text).not.toMatch(/'scheduled'|'in_flight'/);
    expect(q.params.find((p) => p.name === 'older_than_days')).toMatchObject({ value: 30 });
    expect(q.params.find((p) => p.name === 'older_than_rest_ms')).toMatchObject({ value: 0 });
    expect(t).toMatch(/DATEADD\(millisecond, -@older_than_rest_ms, DATEADD\(day, -@older_than_days, SYSUTCDATETIME\(\)\)\)/);
    expect(t).not.toMatch(/DATEADD\(second/);
    expect(t).toMatch(/SET @rows_written = @purged_intents \+ @purged_attempts;/);
  });

  it('clusterOverview: one SELECT at one @now, read-only, every status counted, the lease by name', () => {
    const t = code(opsQueries.clusterOverview(token.leaseName).text);
    expect(t).not.toMatch(/\b(INSERT|UPDATE|DELETE|BEGIN TRANSACTION)\b/);
    expect(t.match(/SYSUTCDATETIME\(\)/g)).toHaveLength(1);
    for (const s of ['scheduled', 'in_flight', 'succeeded', 'failed', 'cancelled']) expect(t).toContain(`AS n_${s}`);
    expect(t).toMatch(/next_attempt_at <= @now\) AS due_now/);
    expect(t).toMatch(/LEFT JOIN submission_manager_leases AS l ON l.lease_name = @lease_name;/);
    // The settled statuses counted up to the cap (a bounded range of the status index), the open ones exactly.
    const raw = opsQueries.clusterOverview(token.leaseName).text;
    for (const s of ['succeeded', 'cancelled']) expect(raw).toContain(`(SELECT TOP (${SETTLED_COUNT_CAP}) 1 AS x FROM submission_intents WHERE status = '${s}') AS c`);
    for (const s of ['scheduled', 'in_flight', 'failed']) expect(raw).toContain(`(SELECT COUNT_BIG(*) FROM submission_intents WHERE status = '${s}') AS n_${s}`);
  });

  it('partitionStates reads the newest attempts\' intents by nested loops; attemptsPerMinute compiles with its window', () => {
    expect(code(samples.partitionStates!().text)).toMatch(/ORDER BY p\.ord\s+OPTION \(LOOP JOIN\);$/);
    expect(code(samples.attemptsPerMinute!().text)).toMatch(/ORDER BY m\.minute\s+OPTION \(RECOMPILE\);$/);
  });

  // Issue 13: DATEADD(second, …) overflowed int from ~24,856 days; RETENTION_DAYS allows 36,500.
  it.each([[1, 1, 0], [24_856, 24_856, 0], [36_500, 36_500, 0], [0.5, 0, 43_200_000]])('retention of %s days → int parameters (%s days, %s ms)', (days, d, rest) => {
    const q = opsQueries.purgeTerminal(token, 0, days * 86_400_000, 1_000);
    const byName = new Map(q.params.map((x) => [x.name, x]));
    expect(byName.get('older_than_days')).toMatchObject({ value: d });
    expect(byName.get('older_than_rest_ms')).toMatchObject({ value: rest });
    for (const name of ['older_than_days', 'older_than_rest_ms']) {
      expect(byName.get(name)!.type.type).toBe(sql.Int);
      expect(Math.abs(byName.get(name)!.value as number)).toBeLessThanOrEqual(2 ** 31 - 1);
    }
  });

  it.each(Object.keys(insightQueries))('%s (dashboard read): read-only and bounded by TOP', (name) => {
    const t = code(samples[name]!().text);
    expect(t).not.toMatch(/\b(INSERT|UPDATE|DELETE|BEGIN TRANSACTION)\b/);
    // partitionStates: the attempts read is TOP (@scan); its backlog is a grouped count, as the cluster overview's counts.
    expect(t).toMatch(/\bTOP \((@limit|@scan|\d+)\)|WHERE started_at >= @since/);
  });

  it('redrive: one transaction; only failed rows (picked under UPDLOCK, re-checked by the UPDATE); recorded; results after COMMIT', () => {
    const q = redriveQueries.redrive(redriveSample);
    const t = code(q.text);
    expect(t).toMatch(/SELECT TOP \(@limit\) intent_id FROM submission_intents WITH \(UPDLOCK, ROWLOCK\)\s+WHERE status = ''/);
    expect(q.text.match(/status = 'failed'/g)).toHaveLength(2);
    expect(t).not.toMatch(/\bDELETE\b|READPAST/);
    expect(t.indexOf('COMMIT TRANSACTION')).toBeLessThan(t.lastIndexOf('SELECT @now AS requested_at'));
    expect(t).toMatch(/INSERT INTO submission_manager_redrives/);
    expect(t).toMatch(/INSERT INTO submission_manager_redriven_intents/);
    // A contract maxAttempts that is not an int fails the redrive (as PostgreSQL's ::int), never a silent fallback.
    expect(t).toMatch(/COALESCE\(CAST\(JSON_VALUE\(i\.contract, ''\) AS int\), i\.max_attempts\)/);
    expect(t).not.toMatch(/TRY_CAST|TRY_CONVERT/);
    expect(q.params.find((x) => x.name === 'ids')!.value).toBe('["01a21664-e79b-72c4-9fe0-858b2d2a3219"]'); // canonical lower case
    expect(redriveQueries.redrive({ ...redriveSample, ids: null }).params.find((x) => x.name === 'ids')!.value).toBeNull();
    expect(() => redriveQueries.redrive({ ...redriveSample, ids: ['nope'] })).toThrow(/UUID/);
  });
});

describe('READPAST is valid under READ_COMMITTED_SNAPSHOT ON (issue 21)', () => {
  // Microsoft's table-hint rule: READPAST in a READ COMMITTED statement needs READCOMMITTEDLOCK when the database runs
  // READ_COMMITTED_SNAPSHOT ON (Azure SQL). Every query builder of the dialect that says READPAST says both.
  it('every READPAST in src/store/mssql comes with READCOMMITTEDLOCK in the same hint list', async () => {
    const { readdirSync, readFileSync } = await import('node:fs');
    const dir = new URL('../../src/store/mssql/', import.meta.url);
    const files = readdirSync(dir, { recursive: true }).map(String).filter((f) => f.endsWith('.ts'));
    const hints = files.flatMap((f) => [...readFileSync(new URL(f, dir), 'utf8').matchAll(/WITH \(([^)]*\bREADPAST\b[^)]*)\)/g)].map((m) => `${f}: ${m[1]}`));
    expect(hints.length).toBeGreaterThan(0);
    for (const h of hints) expect(h).toMatch(/\bREADCOMMITTEDLOCK\b/);
  });
});

describe('mssql retention purge: one partition', () => {
  it('picks only the partition\'s terminal intents (@partition_no, smallint)', () => {
    const q = opsQueries.purgeTerminal(token, 2, 30 * 86_400_000, 1_000);
    expect(q.text).toMatch(/WHERE partition_no = @partition_no AND status IN/);
    expect(q.params.filter((x) => x.name === 'partition_no').map((x) => [x.type?.type, x.value])).toEqual([[sql.SmallInt, 2]]);
  });
});
