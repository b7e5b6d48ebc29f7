// The SQL Server statements whose plan decides whether a call costs a page or the table (docs/sqlserver.md, "plan
// shapes of the large-table statements"), inspected without a server: the optional-filter reads are planned per call,
// and the failed-intent reads write the filter of their filtered index as literal text (a parameter never matches one).
import { describe, expect, it } from 'vitest';
import { intentQueries } from '../../src/store/mssql/intentStore.js';
import { insightQueries } from '../../src/store/mssql/insightStore.js';
import { redriveQueries } from '../../src/store/mssql/redriveStore.js';
import { migrations } from '../../src/store/mssql/migrations/index.js';

const ID = '0190a5b2-7c3d-7abc-8def-0123456789ab';
const redrive = () => redriveQueries.redrive({ redriveId: ID, requestedBy: 'op', reason: null, ids: null, failedFrom: null, failedTo: null,
  errorContains: null, limit: 10 }).text;
const m017 = migrations.find((m) => m.id === 17)!.sql;

describe('SQL Server plan shapes', () => {
  it.each([
    ['intentQueries.list', () => intentQueries.list({ status: 'failed', limit: 10, after: ID }).text, /ORDER BY intent_id OPTION \(RECOMPILE\);/],
    ['insightQueries.searchIntents', () => insightQueries.searchIntents({ intentId: ID, idempotencyKey: null, status: null, createdFrom: null,
      createdTo: null, before: null, limit: 10 }).text, /ORDER BY intent_id DESC OPTION \(RECOMPILE\);/],
    ['redriveQueries.redrive (the pick)', redrive, /ORDER BY last_modified_at, intent_id OPTION \(RECOMPILE\);/],
  ])('%s: optional filters (@x IS NULL OR …) are planned per call, so a given value seeks', (_name, text, shape) => {
    expect(text()).toMatch(shape);
  });

  it('m017: ix_intents_failed_modified (last_modified_at, intent_id) filtered on the literal failed status', () => {
    expect(m017).toMatch(/CREATE INDEX ix_intents_failed_modified ON submission_intents \(last_modified_at, intent_id\) INCLUDE \(status\)\s+WHERE status = 'failed';/);
  });

  it.each([
    ['recentFailures', insightQueries.recentFailures(10).text, /WHERE status = 'failed' ORDER BY last_modified_at DESC, intent_id DESC;/],
    ['redrive', redrive(), /\n WHERE status = 'failed'\n[\s\S]*ORDER BY last_modified_at, intent_id/],
  ])('%s reads the failed intents in (last_modified_at, intent_id) order with the index filter as literal text', (_name, text, shape) => {
    expect(text).toMatch(shape);
  });
});
