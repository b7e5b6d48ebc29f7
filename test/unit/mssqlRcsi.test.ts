// READ_COMMITTED_SNAPSHOT at start (src/store/mssql/rcsi.ts), against a scripted runner: OFF is said once at warn,
// ON and an unreadable setting say nothing, and reading it never fails the start. (The setting's effect itself is
// exercised by the store contract suites, which the GitHub workflow runs against SQL Server with RCSI on and off.)
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';
import type { MssqlRunner, Row } from '../../src/store/mssql/db.js';
import { rcsiQuery, readCommittedSnapshot, warnIfRcsiOff } from '../../src/store/mssql/rcsi.js';

const runner = (answer: Row[][] | Error): MssqlRunner => ({
  async run<R>() {
    if (answer instanceof Error) throw answer;
    return answer as R[][];
  },
  async runBatch() {},
});

describe('READ_COMMITTED_SNAPSHOT check', () => {
  it('reads the current database from sys.databases', () => {
    expect(rcsiQuery.text).toBe('SELECT is_read_committed_snapshot_on AS rcsi FROM sys.databases WHERE database_id = DB_ID();');
  });
  it.each([
    ['ON (bit true)', [[{ rcsi: true }]], true, 0],
    ['ON (1)', [[{ rcsi: 1 }]], true, 0],
    ['OFF', [[{ rcsi: false }]], false, 1],
    ['no row (no access)', [[]], null, 0],
    ['the read fails', new Error('VIEW DATABASE STATE permission denied'), null, 0],
  ] as const)('%s → %s, %s warning(s)', async (_name, answer, value, warnings) => {
    const r = runner(answer as Row[][] | Error);
    if (!(answer instanceof Error)) expect(await readCommittedSnapshot(r)).toBe(value);
    const logs: Record<string, unknown>[] = [];
    await warnIfRcsiOff(r, createLogger('info', { write: (s: string) => void logs.push(JSON.parse(s) as Record<string, unknown>) }));
    expect(logs.filter((l) => l.event === 'mssql_rcsi_off' && l.level === 'warn')).toHaveLength(warnings);
  });
});
