// READ_COMMITTED_SNAPSHOT (RCSI): what the product requires of a SQL Server database (docs/sqlserver.md).
// ON (Azure SQL's default) is the supported production setting: schedule reads see row versions and never wait
// for writers. OFF (a plain SQL Server's default) stays correct — the fence's HOLDLOCK, the lease statements'
// UPDLOCK/XLOCK and the purge's READPAST + READCOMMITTEDLOCK lock the same either way — but a reader waits behind
// a writer's locks, so a slow writer can make a leader's refresh hit its request timeout and drop leadership. The
// store contract suites run with both (.github/workflows/ci.yml); a process on an OFF database says so at start.
import type { Logger } from '../../observability/logger.js';
import type { MssqlRunner } from './db.js';
import type { SqlQuery } from './params.js';

export const rcsiQuery: SqlQuery = {
  text: 'SELECT is_read_committed_snapshot_on AS rcsi FROM sys.databases WHERE database_id = DB_ID();',
  params: [],
};

/** The current database's READ_COMMITTED_SNAPSHOT setting (null: not readable, e.g. no access to sys.databases). */
export async function readCommittedSnapshot(db: MssqlRunner): Promise<boolean | null> {
  const [rows = []] = await db.run<{ rcsi: boolean | number | null }>(rcsiQuery);
  const v = rows[0]?.rcsi;
  return v === undefined || v === null ? null : v === true || v === 1;
}

/** At start, best effort: warn when the database runs READ_COMMITTED_SNAPSHOT OFF (never fails the start). */
export async function warnIfRcsiOff(db: MssqlRunner, logger: Logger): Promise<void> {
  const on = await readCommittedSnapshot(db).catch(() => null);
  if (on === false) {
    logger.warn({ event: 'mssql_rcsi_off' }, 'READ_COMMITTED_SNAPSHOT is OFF: correct, but schedule reads wait for writers and a slow ' +
      'writer can cost the leader its lease; turn it ON as Azure SQL has it (docs/sqlserver.md)');
  }
}
