// Applies numbered SQL Server migrations idempotently, in one transaction holding a transaction-owned
// application lock (sp_getapplock, database-scoped), so two migrators started at once serialise instead of
// failing. DDL is transactional in SQL Server: a failed migration leaves nothing behind.
import type { MssqlDatabase } from './db.js';
import { p, type SqlQuery } from './params.js';
import { migrations, type Migration } from './migrations/index.js';

export const migrateQueries = {
  lock(timeoutMs: number): SqlQuery {
    return {
      text: `DECLARE @lock_result int;
EXEC @lock_result = sp_getapplock @Resource = N'submission_manager_migrations', @LockMode = 'Exclusive',
  @LockOwner = 'Transaction', @LockTimeout = @lock_timeout_ms;
IF @lock_result < 0
  THROW 51000, 'submission_manager_migrations: could not take the migration lock (sp_getapplock)', 1;`,
      params: [p.int('lock_timeout_ms', timeoutMs)],
    };
  },
  /** The newest migration applied (0 when the table does not exist yet): one cheap read. */
  version(): SqlQuery {
    return {
      text: `IF OBJECT_ID(N'submission_manager_migrations', N'U') IS NULL
  SELECT CAST(0 AS int) AS v;
ELSE
  SELECT ISNULL(MAX(id), 0) AS v FROM submission_manager_migrations;`,
      params: [],
    };
  },
  applied(): SqlQuery {
    return { text: 'SELECT id FROM submission_manager_migrations;', params: [] };
  },
  record(m: Migration): SqlQuery {
    return {
      text: 'INSERT INTO submission_manager_migrations (id, name) VALUES (@id, @name);',
      params: [p.int('id', m.id), p.varchar('name', 128, m.name)],
    };
  },
};

export const MIGRATIONS_TABLE = `
IF OBJECT_ID(N'submission_manager_migrations', N'U') IS NULL
  CREATE TABLE submission_manager_migrations (
    id         int          NOT NULL CONSTRAINT pk_submission_manager_migrations PRIMARY KEY,
    name       varchar(128) NOT NULL,
    applied_at datetime2(7) NOT NULL CONSTRAINT df_submission_manager_migrations_applied_at DEFAULT (SYSUTCDATETIME())
  );`;

export async function migrateMssql(
  db: MssqlDatabase,
  list: readonly Migration[] = migrations,
  opts: { lockTimeoutMs?: number } = {},
): Promise<{ applied: number[] }> {
  return db.transaction(async (tx) => {
    await tx.run(migrateQueries.lock(opts.lockTimeoutMs ?? 60_000));
    await tx.runBatch(MIGRATIONS_TABLE);
    const [rows = []] = await tx.run<{ id: number }>(migrateQueries.applied());
    const done = new Set(rows.map((r) => Number(r.id)));
    const applied: number[] = [];
    for (const m of [...list].sort((a, b) => a.id - b.id)) {
      if (done.has(m.id)) continue;
      for (const batch of splitBatches(m.sql)) await tx.runBatch(batch);
      await tx.run(migrateQueries.record(m));
      applied.push(m.id);
    }
    return { applied };
  });
}

/**
 * Cold start: one version check on the ordinary pool; only when migrations are missing, open a dedicated
 * connection (`openDedicated`: the migration timeout instead of the request one) and migrate on it.
 */
export async function migrateMssqlIfNeeded(
  db: MssqlDatabase,
  openDedicated?: () => Promise<MssqlDatabase>,
  list: readonly Migration[] = migrations,
  opts: { lockTimeoutMs?: number } = {},
): Promise<{ applied: number[] }> {
  const [rows = []] = await db.run<{ v: number }>(migrateQueries.version());
  if (Number(rows[0]?.v ?? 0) >= Math.max(...list.map((m) => m.id))) return { applied: [] };
  if (!openDedicated) return migrateMssql(db, list, opts);
  const dedicated = await openDedicated();
  try {
    return await migrateMssql(dedicated, list, opts);
  } finally {
    await dedicated.close();
  }
}

/**
 * Split a script into batches the way sqlcmd / SSMS do: a line holding only `GO` (any case, optional
 * surrounding whitespace, optional repeat count, optional trailing `--` comment) ends a batch; the GO line is
 * not sent. Batches with nothing but whitespace and `--` comments are dropped. (Our migrations contain no
 * block comments or string literals spanning a GO line, the cases where a plain line scan would differ.)
 */
export function splitBatches(script: string): string[] {
  const batches: string[] = [];
  let current: string[] = [];
  const flush = (times: number) => {
    const text = current.join('\n').trim();
    const meaningful = text.split('\n').some((l) => l.trim() !== '' && !l.trim().startsWith('--'));
    if (meaningful) for (let i = 0; i < times; i++) batches.push(text);
    current = [];
  };
  for (const line of script.split(/\r?\n/)) {
    const go = /^\s*go(?:\s+(\d+))?\s*(?:--.*)?$/i.exec(line);
    if (go) flush(go[1] ? Number(go[1]) : 1);
    else current.push(line);
  }
  flush(1);
  return batches;
}
