// SQL Server partition changes (issue 26) and the intake's partition, inspected without a server (the contract suite
// runs only where SQL Server does): the multi-lease fence, the request's lock on the count row, the switch's recovery,
// moves that keep last_modified_at, the unfenced preparing pass (a key range; settled intents with no attempt started
// only, the partition rule in SQL), the completion's release, the reassignment read's scopes (index seeks, not a walk of
// the primary key), and id order decided in SQL.
import { describe, expect, it } from 'vitest';
import sql from 'mssql';
import { partitionChangeQueries as q } from '../../src/store/mssql/partitionChangeQueries.js';
import { partitionReassignQueries as r } from '../../src/store/mssql/partitionReassignQueries.js';
import { partitionCancelQueries as c } from '../../src/store/mssql/partitionCancelQueries.js';
import { intentQueries } from '../../src/store/mssql/intentStore.js';
import type { SqlQuery } from '../../src/store/mssql/params.js';
import { StoreError } from '../../src/store/ports.js';
import { appVersion } from '../../src/version.js';

const ID = '0190a5b2-7c3d-7abc-8def-0123456789ab';
const fence = [0, 1, 2].map((k) => ({ leaseName: `executor${k === 0 ? '' : `-${k}`}`, holderId: 'h~changer', leaseEpoch: 7 + k }));
const contract = { provider: { url: null }, payload: {}, retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2 } };
/** SQL with string literals and -- comments blanked. */
const code = (text: string) => text.replace(/'(?:[^']|'')*'/g, "''").replace(/--.*$/gm, '');
const param = (x: SqlQuery, name: string) => x.params.find((y) => y.name === name);

const fenced: [string, SqlQuery][] = [
  ['claimChange', q.claimChange(fence, ID)],
  ['switchCount', q.switchCount(fence, ID)],
  ['moveIntents', q.moveIntents(fence, ID, [{ intentId: ID, partition: 2 }], { scanCursor: ID, scanDone: true })],
  ['completeChange', q.completeChange(fence, ID)],
];

describe('changer writes: one batch fenced by every lease token', () => {
  it.each(fenced)('%s: tokens as one JSON parameter, in order; each lease row read WITH (HOLDLOCK, ROWLOCK) by (name, holder, epoch), expiry checked in the next statement', (_n, x) => {
    expect(x.text).toMatch(/^\s*SET XACT_ABORT ON;/);
    const tokens = param(x, 'fence_tokens')!;
    expect(tokens.type).toEqual(sql.NVarChar(sql.MAX));
    expect(JSON.parse(tokens.value as string)).toEqual(fence.map((t, ord) => ({ ord, ...t })));
    const begin = x.text.indexOf('BEGIN TRANSACTION;');
    const loop = x.text.indexOf('WHILE @fence_i < @fence_n');
    expect(x.text.indexOf('FROM OPENJSON(@fence_tokens)')).toBeLessThan(begin);
    expect(loop).toBeGreaterThan(begin);
    expect(x.text.slice(loop)).toMatch(/^WHILE @fence_i < @fence_n\nBEGIN\n {2}SELECT @fence_name = lease_name, @fence_holder = holder_id, @fence_epoch = lease_epoch FROM @fence WHERE ord = @fence_i;\n {2}SET @fence_expires = NULL;\n {2}SELECT @fence_expires = expires_at FROM submission_manager_leases WITH \(HOLDLOCK, ROWLOCK\)\n {3}WHERE lease_name = @fence_name AND holder_id = @fence_holder AND lease_epoch = @fence_epoch;\n {2}IF @fence_expires IS NULL OR NOT \(@fence_expires > SYSUTCDATETIME\(\)\) BREAK;\n {2}SET @fence_i = @fence_i \+ 1;\nEND;\nIF @fence_n = 0 OR @fence_i < @fence_n\nBEGIN\n {2}ROLLBACK TRANSACTION;\n {2}SELECT CAST\(0 AS bit\) AS fenced;\n {2}RETURN;\nEND;/);
  });

  it.each(fenced)('%s: every write between the fence and COMMIT, one audit row per token, the change row selected after COMMIT', (_n, x) => {
    const c = code(x.text);
    const held = c.indexOf('RETURN;\nEND;');
    const commit = c.indexOf('COMMIT TRANSACTION;');
    expect(held).toBeGreaterThan(0);
    for (const m of c.matchAll(/\b(UPDATE|INSERT INTO) (submission_\w+|[a-z])\b/g)) {
      expect(m.index!).toBeGreaterThan(held);
      expect(m.index!).toBeLessThan(commit);
    }
    expect(c).toMatch(/IF @rows_written > 0\n {2}INSERT INTO submission_execution_audit \(lease_name, lease_epoch, holder_id, \[action\], rows_written, \[at\]\)\n {2}SELECT lease_name, lease_epoch, holder_id, @fence_action, @rows_written, SYSUTCDATETIME\(\) FROM @fence;\nCOMMIT/);
    expect(c.slice(commit)).toMatch(/^COMMIT TRANSACTION;\nSELECT CAST\(1 AS bit\) AS fenced;\nSELECT change_id, [^;]* FROM submission_manager_partition_changes WHERE change_id = @change_id;$/);
  });

  it('tokens are checked like their columns, exact repeats dropped', () => {
    expect(() => q.claimChange([{ ...fence[0]!, leaseName: 'x'.repeat(65) }], ID)).toThrow(StoreError);
    expect(() => q.claimChange([{ ...fence[0]!, leaseEpoch: 1.5 }], ID)).toThrow(StoreError);
    expect(JSON.parse(param(q.claimChange([fence[0]!, fence[0]!, fence[1]!], ID), 'fence_tokens')!.value as string)).toHaveLength(2);
  });
});

describe('partition change statements', () => {
  it('the release guard (m018): the request records requested_release, the claim release_changer beside changer, the switch switched_by', () => {
    expect(param(q.requestChange(8, 'ops', ID), 'requested_release')!.value).toBe(appVersion());
    expect(q.claimChange(fence, ID).text).toMatch(/SET changer = @changer, release_changer = @changer, claimed_at = SYSUTCDATETIME\(\)/);
    expect(q.switchCount(fence, ID).text).toMatch(/switched_at = @now, switched_by = @changer WHERE/);
  });

  it('readLayout: one statement, no lock hint, no write: the count row and the active change beside database time', () => {
    const t = q.readLayout().text;
    expect(t.trim().split(';').filter((s) => s.trim())).toHaveLength(1);
    expect(t).toMatch(/SELECT SYSUTCDATETIME\(\) AS db_now, c\.partition_count, c\.recorded_at, c\.recorded_by, c\.layout_generation, a\.\*\n/);
    expect(t).toMatch(/LEFT JOIN submission_manager_partition_count AS c ON c\.id = one\.id/);
    expect(t).toMatch(/OUTER APPLY \(SELECT TOP \(1\) [^)]* FROM submission_manager_partition_changes\s+WHERE state <> 'completed' ORDER BY requested_at DESC, change_id DESC\) AS a;/);
    expect(code(t)).not.toMatch(/\bWITH \(|\b(UPDATE|INSERT|DELETE)\b/);
  });

  it('requestChange: the count row WITH (UPDLOCK, HOLDLOCK) first in the transaction, then the decision and the insert; answers after COMMIT', () => {
    const t = q.requestChange(8, 'ops', ID).text;
    // decideChangeRequest's order: this request's own change (a retry), the active change, the count, else create.
    expect(t).toMatch(/IF @same IS NOT NULL\nBEGIN\n {2}SET @active = @same;\n {2}SET @outcome = 'existing';\nEND\nELSE IF @active IS NOT NULL\nBEGIN\n {2}SET @outcome = CASE WHEN @active_to = @to_count THEN 'existing' ELSE 'conflict' END;\nEND\nELSE IF ISNULL\(@count, 1\) = @to_count\nBEGIN\n {2}SET @outcome = 'unchanged';\nEND\nELSE\nBEGIN\n {2}INSERT/);
    const begin = t.indexOf('BEGIN TRANSACTION;');
    const lock = t.indexOf('FROM submission_manager_partition_count WITH (UPDLOCK, HOLDLOCK) WHERE id = 1;');
    const now = t.indexOf('SET @now = SYSUTCDATETIME();');
    const active = t.indexOf("WHERE state <> 'completed'");
    const insert = t.indexOf('INSERT INTO submission_manager_partition_changes');
    const commit = t.indexOf('COMMIT TRANSACTION;');
    expect(begin).toBeGreaterThan(0);
    expect([lock, now, active, insert, commit].every((v, i, a) => v > (i === 0 ? begin : a[i - 1]!))).toBe(true);
    expect(t.slice(insert)).toMatch(/VALUES \(@change_id, ISNULL\(@count, 1\), @to_count, 'preparing', @now, @requested_by, 0, @requested_release, 0\)/);
    expect(t.slice(commit)).toMatch(/ISNULL\(@count, 1\) AS partition_count[\s\S]*ISNULL\(@recorded_by, 'none'\) AS recorded_by;\nSELECT [^;]* WHERE change_id = @active;$/);
    expect(param(q.requestChange(8, 'ops', ID), 'to_count')!.type).toEqual(sql.SmallInt());
  });

  it('switchCount: only a pending change (re-read under UPDLOCK, HOLDLOCK); the count := to_count and the layout generation + 1 first (it waits for inserts in flight); other intents with a started attempt bumped, started attempts abandoned, in_flight intents due now (bumped), then reassigning', () => {
    const t = q.switchCount(fence, ID).text;
    const at = (s: string) => t.indexOf(s);
    const steps = [
      "SELECT @to = to_count, @m = CASE WHEN from_count > to_count THEN from_count ELSE to_count END FROM submission_manager_partition_changes WITH (UPDLOCK, HOLDLOCK) WHERE change_id = @change_id AND state = 'pending';",
      'IF @m IS NOT NULL AND @fence_n < @m\n  THROW 51001, ',
      'IF @to IS NOT NULL',
      'SET partition_count = @to, recorded_at = @now, recorded_by = @changer, layout_generation = layout_generation + 1',
      "SELECT 1, @to, @now, @changer, 1\n     WHERE NOT EXISTS",
      'UPDATE i\n     SET last_modified_at = CASE WHEN @now > i.last_modified_at THEN @now ELSE DATEADD(nanosecond, 100, i.last_modified_at) END\n    FROM submission_intents AS i\n',
      "   WHERE i.status <> 'in_flight'\n     AND EXISTS (SELECT 1 FROM submission_attempts AS a WHERE a.intent_id = i.intent_id AND a.outcome = 'started');\n  SET @bumped = @@ROWCOUNT;",
      "UPDATE submission_attempts\n     SET outcome = 'abandoned', finished_at = @now,",
      "   WHERE outcome = 'started';",
      "UPDATE i\n     SET status = CASE WHEN ",
      'next_attempt_at = @now, last_modified_at = CASE WHEN @now > i.last_modified_at THEN @now ELSE DATEADD(nanosecond, 100, i.last_modified_at) END,',
      "   WHERE i.status = 'in_flight';",
      "UPDATE submission_manager_partition_changes SET state = 'reassigning', switched_at = @now, switched_by = @changer WHERE change_id = @change_id AND state = 'pending';",
    ];
    for (const s of steps) expect(at(s), s).toBeGreaterThan(0);
    expect(steps.map(at)).toEqual([...steps.map(at)].sort((a, b) => a - b));
    expect(t).toMatch(/THEN 'failed' ELSE 'scheduled' END/); // the recovery budget rule (attemptBudget.ts)
    expect(t).toMatch(/SET @rows_written = @bumped \+ @settled \+ @recovered \+ @switched;/);
    expect(param(q.switchCount(fence, ID), 'changer')!.value).toBe('h~changer');
  });

  it('moveIntents: only while reassigning; partition_no from the JSON moves, last_modified_at untouched; rows_moved += rows changed (a retry adds 0); cursor forward only', () => {
    const x = q.moveIntents(fence, ID, [{ intentId: ID.toUpperCase(), partition: 2 }], { scanCursor: null, scanDone: false });
    expect(code(x.text)).not.toMatch(/last_modified_at/);
    expect(x.text).toMatch(/SELECT @to = to_count, @m = [^;]* FROM submission_manager_partition_changes WITH \(UPDLOCK, HOLDLOCK\) WHERE change_id = @change_id AND state = 'reassigning';\nIF @m IS NOT NULL AND @fence_n < @m\n {2}THROW 51001, [^;]*;\nIF @to IS NOT NULL AND EXISTS \(SELECT 1 FROM OPENJSON\(@moves\) WITH \(partition_no int '\$\.partition'\) WHERE partition_no < 0 OR partition_no >= @to\)\n {2}THROW 51002, [^;]*;\nIF @to IS NOT NULL\nBEGIN\n/);
    expect(x.text).toMatch(/UPDATE i SET partition_no = m\.partition_no\n\s+FROM submission_intents AS i\n\s+JOIN OPENJSON\(@moves\) WITH \(intent_id char\(36\) '\$\.intentId', partition_no smallint '\$\.partition'\) AS m\n\s+ON i\.intent_id = m\.intent_id COLLATE Latin1_General_100_BIN2\n\s+WHERE i\.partition_no <> m\.partition_no;\n\s+SET @moved = @@ROWCOUNT;/);
    expect(x.text).toMatch(/rows_moved = rows_moved \+ @moved/);
    expect(x.text).toMatch(/scan_cursor = CASE WHEN @scan_cursor IS NOT NULL AND \(scan_cursor IS NULL OR @scan_cursor > scan_cursor\)/);
    expect(x.text).toMatch(/scan_done_at = CASE WHEN @scan_done = 1 AND scan_done_at IS NULL THEN SYSUTCDATETIME\(\) ELSE scan_done_at END/);
    expect(JSON.parse(param(x, 'moves')!.value as string)).toEqual([{ intentId: ID, partition: 2 }]);
    expect([param(x, 'scan_cursor')!.value, param(x, 'scan_done')!.value]).toEqual([null, 0]);
    expect(() => q.moveIntents(fence, ID, [{ intentId: 'nope', partition: 1 }], { scanCursor: null, scanDone: false })).toThrow(StoreError);
    expect(() => q.moveIntents(fence, ID, [{ intentId: ID, partition: 40_000 }], { scanCursor: null, scanDone: false })).toThrow(StoreError);
  });

  it('completeChange: reassigning → completed, then every fenced lease expired in place (holder, epoch, unexpired at @now) with a released event, in the transaction', () => {
    const t = q.completeChange(fence, ID).text;
    const loopEnd = t.indexOf('RETURN;\nEND;');
    const now = t.indexOf('SET @now = SYSUTCDATETIME();');
    expect(now).toBeGreaterThan(loopEnd); // the time is read after every lease row is locked
    expect(t).toMatch(/SELECT @m = [^;]* WHERE change_id = @change_id AND state = 'reassigning';\nIF @m IS NOT NULL AND @fence_n < @m\n {2}THROW 51001, [^;]*;\nSET @now/);
    expect(t).toMatch(/UPDATE submission_manager_partition_changes SET state = 'completed', completed_at = @now WHERE change_id = @change_id AND state = 'reassigning';\nSET @completed = @@ROWCOUNT;\nIF @completed > 0/);
    expect(t).toMatch(/UPDATE l\n\s+SET expires_at = @now, renewed_at = @now\n\s+OUTPUT inserted\.lease_name, inserted\.lease_epoch, inserted\.holder_id INTO @rel\n\s+FROM submission_manager_leases AS l\n\s+JOIN @fence AS f ON l\.lease_name = f\.lease_name AND l\.holder_id = f\.holder_id AND l\.lease_epoch = f\.lease_epoch\n\s+WHERE l\.expires_at > @now;/);
    expect(t).toMatch(/INSERT INTO submission_manager_lease_events \(lease_name, lease_epoch, holder_id, \[event\], \[at\]\)\n\s+SELECT lease_name, lease_epoch, holder_id, 'released', @now FROM @rel;/);
    expect(code(t)).not.toMatch(/\bDELETE\b/);
    expect(t.indexOf("'released'")).toBeLessThan(t.indexOf('COMMIT TRANSACTION;'));
  });

  it('prepareBatch: unfenced, one transaction; the change row WITH (UPDLOCK, HOLDLOCK) first (its cursor fixes the range), nothing unless preparing; the answer after COMMIT', () => {
    const x = r.prepareBatch(ID, { limit: 10_000, horizon: new Date(0) });
    expect(x.text).toMatch(/^\s*SET XACT_ABORT ON;\nSET NOCOUNT ON;\nDECLARE @now datetime2\(7\) = SYSUTCDATETIME\(\);\nDECLARE @to smallint;\nDECLARE @from char\(36\);\nDECLARE @hi char\(36\);\nDECLARE @moved int = 0;\nBEGIN TRANSACTION;\nSELECT @to = to_count, @from = ISNULL\(prepare_cursor, ''\) FROM submission_manager_partition_changes WITH \(UPDLOCK, HOLDLOCK\) WHERE change_id = @change_id AND state = 'preparing';\nIF @to IS NOT NULL\nBEGIN\n/);
    const c = code(x.text);
    expect(c).not.toMatch(/@fence|submission_manager_leases|submission_execution_audit/); // no lease: settled intents only
    const commit = c.indexOf('COMMIT TRANSACTION;');
    const writes = [...c.matchAll(/\b(UPDATE|INSERT INTO|DELETE)\b/g)];
    expect(writes.map((m) => m[1])).toEqual(['UPDATE', 'UPDATE', 'UPDATE']);
    for (const m of writes) expect(m.index!).toBeLessThan(commit);
    expect(c.slice(commit)).toMatch(/^COMMIT TRANSACTION;\nSELECT change_id, [^;]* FROM submission_manager_partition_changes WHERE change_id = @change_id;$/);
    expect(x.params.map((y) => [y.name, y.value])).toEqual([['change_id', ID], ['limit', 10_000], ['horizon', new Date(0)]]);
    expect(() => r.prepareBatch(ID, { limit: 0, horizon: new Date(0) })).toThrow(RangeError);
    expect(() => r.prepareBatch('nope', { limit: 1, horizon: new Date(0) })).toThrow(StoreError);
  });

  it('prepareBatch: the key range is the next @limit ids of the primary key; in it the settled rows modified before the horizon with a call out are bumped, then those with no attempt started moved to the rule (SHA-256 of the UTF-8 key, 4 bytes, mod @to) where it differs; rows_moved += rows moved; cursor forward only; the range to the last id → pending once (cancelled, moving rows back: completed)', () => {
    const t = r.prepareBatch(ID, { limit: 10, horizon: new Date(0) }).text;
    expect(t).toMatch(/SELECT @hi = intent_id FROM submission_intents WHERE intent_id > @from ORDER BY intent_id OFFSET @limit - 1 ROWS FETCH NEXT 1 ROWS ONLY;/);
    const range = "i\\.intent_id > @from AND i\\.intent_id <= ISNULL\\(@hi, 'ffffffff-ffff-ffff-ffff-ffffffffffff'\\) AND i\\.last_modified_at < @horizon";
    const rule = "\\(CAST\\(CAST\\(HASHBYTES\\('SHA2_256', CAST\\(COALESCE\\(i\\.partition_key, i\\.intent_id\\) COLLATE Latin1_General_100_BIN2_UTF8 AS varchar\\(512\\)\\)\\) AS binary\\(4\\)\\) AS bigint\\) % @to\\)";
    expect(t).toMatch(new RegExp(`UPDATE i SET last_modified_at = CASE WHEN SYSUTCDATETIME\\(\\) > i\\.last_modified_at THEN SYSUTCDATETIME\\(\\) ELSE DATEADD\\(nanosecond, 100, i\\.last_modified_at\\) END\\n\\s+FROM submission_intents AS i WHERE ${range} AND i\\.status IN \\('succeeded', 'cancelled'\\)\\n\\s+AND EXISTS \\(SELECT 1 FROM submission_attempts AS a WHERE a\\.intent_id = i\\.intent_id AND a\\.outcome = 'started'\\);\\n {2}UPDATE i SET partition_no = ${rule}\\n\\s+FROM submission_intents AS i WHERE ${range} AND i\\.status IN \\('succeeded', 'cancelled'\\)\\n\\s+AND NOT EXISTS \\(SELECT 1 FROM submission_attempts AS a WHERE a\\.intent_id = i\\.intent_id AND a\\.outcome = 'started'\\) AND i\\.partition_no <> ${rule};\\n {2}SET @moved = @@ROWCOUNT;`)); // bump, then move: an attempt never reopens, so a row meets one of the two
    expect(code(t)).not.toMatch(/scheduled|in_flight/);
    expect(t).toMatch(/UPDATE submission_manager_partition_changes\n\s+SET rows_moved = rows_moved \+ @moved,\n\s+release_rows_moved = release_rows_moved \+ @moved,\n\s+prepare_cursor = CASE WHEN @hi IS NOT NULL AND \(prepare_cursor IS NULL OR @hi > prepare_cursor\) THEN @hi ELSE prepare_cursor END,\n\s+release_prepare_cursor = CASE WHEN @hi IS NOT NULL AND \(release_prepare_cursor IS NULL OR @hi > release_prepare_cursor\) THEN @hi ELSE release_prepare_cursor END,\n\s+state = CASE WHEN @hi IS NOT NULL THEN state WHEN cancelled_at IS NULL THEN 'pending' ELSE 'completed' END,\n\s+prepared_at = CASE WHEN @hi IS NULL THEN @now ELSE prepared_at END,\n\s+release_prepared_at = CASE WHEN @hi IS NULL THEN @now ELSE release_prepared_at END,\n\s+completed_at = CASE WHEN @hi IS NULL AND cancelled_at IS NOT NULL THEN @now ELSE completed_at END\n\s+WHERE change_id = @change_id AND state = 'preparing';\nEND;/);
  });

  it('switchCount leaves a preparing change alone: it reads and writes only a pending one', () => {
    const t = q.switchCount(fence, ID).text;
    expect(t.match(/\bstate = '\w+'/g)).toEqual(["state = 'pending'", "state = 'reassigning'", "state = 'pending'"]); // read, set, guard
    expect(t).not.toMatch(/preparing/);
  });

  const OPEN = "status IN ('scheduled', 'in_flight', 'failed')";
  const UNSETTLED = `SELECT TOP (@limit) intent_id, partition_key, partition_no FROM submission_intents WHERE ${OPEN} AND intent_id > @after ORDER BY intent_id`;
  it('listForReassign open: an ordered seek of the filtered index ix_intents_unsettled (its filter as literal text), TOP rows', () => {
    const x = r.listForReassign({ scope: 'open', after: null, modifiedSince: null, limit: 100 });
    expect(x.text).toBe(`${UNSETTLED};`);
    expect(x.params.map((y) => [y.name, y.value])).toEqual([['limit', 100], ['after', '']]);
  });

  it.each([['open', true], ['all', false]] as const)('listForReassign %s with modifiedSince: each partition 0..MAX(partition_no) a seek of its modified range (CROSS APPLY), sorted, TOP rows (open: UNION the unsettled seek)', (scope, unsettled) => {
    const x = r.listForReassign({ scope, after: ID, modifiedSince: new Date(0), limit: 100 });
    expect(x.text).toMatch(/^DECLARE @max_p smallint = \(SELECT MAX\(partition_no\) FROM submission_intents\);\nWITH parts AS \(SELECT CAST\(0 AS smallint\) AS p WHERE @max_p IS NOT NULL\n {2}UNION ALL SELECT CAST\(p \+ 1 AS smallint\) FROM parts WHERE p < @max_p\)\n/);
    expect(x.text).toMatch(/CROSS APPLY \(SELECT intent_id, partition_key, partition_no FROM submission_intents\n\s+WHERE partition_no = parts\.p AND last_modified_at >= @modified_since AND intent_id > @after\) AS m\n\s+ORDER BY m\.intent_id/);
    expect(x.text.includes(UNSETTLED)).toBe(unsettled);
    expect(x.text).toMatch(/OPTION \(MAXRECURSION 32767\);$/);
    expect(x.params.map((y) => y.name)).toEqual(['limit', 'after', 'modified_since']);
  });

  it('listForReassign all without modifiedSince (tests and tools only): the primary key from the cursor in BIN2 order', () => {
    const x = r.listForReassign({ scope: 'all', after: ID, modifiedSince: null, limit: 100 });
    expect(x.text).toBe('SELECT TOP (@limit) intent_id, partition_key, partition_no FROM submission_intents WHERE intent_id > @after ORDER BY intent_id;');
    expect(x.params.map((y) => [y.name, y.value])).toEqual([['limit', 100], ['after', ID]]);
  });
});

describe('intake: the partition in the INSERT', () => {
  it('the explicit partition, else the hash mod the recorded count (1 if none; bigint arithmetic), else 0; the count read with a shared lock held to the commit', () => {
    const t = intentQueries.insert({ intentId: ID, idempotencyKey: null, requestHash: 'a'.repeat(64), contract, maxAttempts: 3, notBefore: null,
      partitionHash: 123 }).text;
    expect(t).toMatch(/last_modified_at, partition_no, partition_key\)\nSELECT [\s\S]*COALESCE\(@partition_no,\s+@partition_hash % ISNULL\(\(SELECT partition_count FROM submission_manager_partition_count WITH \(REPEATABLEREAD\) WHERE id = 1\), 1\),\s+0\),\s+@partition_key\n WHERE/);
    expect(t.match(/submission_manager_partition_count WITH \(REPEATABLEREAD\)/g)).toHaveLength(1);
    expect(t).toMatch(/SELECT CAST\(1 AS bit\) AS created, [^;]*partition_no[^;]* FROM submission_intents WHERE intent_id = @intent_id;/);
  });
});

describe('cancel and the failed-step report (SQL Server, no server here: the text)', () => {
  const id = '01a21664-e75d-7511-bfbf-d9834bd6e04b';
  it('cancel: one transaction, the change row read WITH (UPDLOCK, HOLDLOCK) first (as every step), then ended or moving back, only before the switch', () => {
    const t = c.cancelChange(id, 'ops').text;
    expect(t).toMatch(/SET XACT_ABORT ON;[\s\S]*BEGIN TRANSACTION;\nSELECT [^;]+ WITH \(UPDLOCK, HOLDLOCK\) WHERE change_id = @change_id;\nUPDATE/);
    expect(t).toMatch(/WHERE change_id = @change_id AND state IN \('preparing', 'pending'\) AND NOT \(state = 'preparing' AND cancelled_at IS NOT NULL\);\nCOMMIT TRANSACTION;/);
    // Every SET expression reads the row before the update: nothing moved → ended now, else preparing under from_count.
    expect(t).toMatch(/state = CASE WHEN \(rows_moved = 0 OR from_count = to_count\) THEN 'completed' ELSE 'preparing' END/);
    expect(t).toMatch(/to_count = CASE WHEN \(rows_moved = 0 OR from_count = to_count\) THEN to_count ELSE from_count END/);
    expect(t).toMatch(/prepare_cursor = CASE WHEN \(rows_moved = 0 OR from_count = to_count\) THEN prepare_cursor ELSE NULL END/);
  });
  it('failed steps: counted on an active change only, the row returned by OUTPUT; reset only when counted', () => {
    const f = c.recordStepFailure(id, 'x'.repeat(400));
    expect(f.text).toMatch(/SET failed_steps = failed_steps \+ 1, last_step_error = @error, last_failed_at = SYSUTCDATETIME\(\)\nOUTPUT inserted\.change_id, /);
    expect(f.text).toMatch(/WHERE change_id = @change_id AND state <> 'completed';$/);
    expect(f.params.find((p) => p.name === 'error')?.value).toBe('x'.repeat(300));
    expect(c.clearStepFailures(id).text).toBe('UPDATE submission_manager_partition_changes SET failed_steps = 0 WHERE change_id = @change_id AND failed_steps > 0;');
  });
});
