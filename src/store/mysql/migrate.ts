// Applies numbered migrations idempotently on one connection under a named lock (GET_LOCK, scoped to the
// current database), so two migrators started at once serialise instead of failing. MySQL DDL commits
// implicitly, so there is no enclosing transaction: each statement is idempotent and a migration is recorded
// only after all of its statements ran (an interrupted one runs again in full).
import type { MyDatabase, MyQueryable } from './db.js';
import { migrations, type Migration } from './migrations/index.js';
import { isStoreError } from '../ports.js';
import { splitStatements } from '../sqlScript.js';

/** The named lock every migrator of this database takes first (GET_LOCK, session-owned): one runs at a time. */
export const MIGRATION_LOCK = "CONCAT('sm_migrate_', MD5(DATABASE()))";

/** The newest migration applied (0: none yet): one primary-key read, cheap enough for every cold start. */
export async function schemaVersion(db: MyQueryable): Promise<number> {
  try {
    const r = await db.query<{ v: number | null }>('SELECT MAX(id) AS v FROM submission_manager_migrations');
    return Number(r.rows[0]?.v ?? 0);
  } catch (e) {
    if (isStoreError(e) && e.code === '1146') return 0; // ER_NO_SUCH_TABLE: a fresh database
    throw e;
  }
}

export async function migrateMysql(db: MyDatabase, list: readonly Migration[] = migrations, opts: { lockTimeoutMs?: number } = {}):
Promise<{ applied: number[] }> {
  return db.session(async (s) => {
    const seconds = Math.max(1, Math.ceil((opts.lockTimeoutMs ?? 60_000) / 1000));
    const got = await s.query<{ ok: number | null }>(`SELECT GET_LOCK(${MIGRATION_LOCK}, ?) AS ok`, [seconds]);
    if (Number(got.rows[0]?.ok) !== 1) throw new Error(`submission_manager_migrations: could not take the migration lock within ${seconds} s`);
    try {
      await s.query(`CREATE TABLE IF NOT EXISTS submission_manager_migrations (
        id INT NOT NULL PRIMARY KEY, name VARCHAR(128) NOT NULL, applied_at DATETIME(6) NOT NULL) ENGINE=InnoDB`);
      const done = new Set((await s.query<{ id: number }>('SELECT id FROM submission_manager_migrations')).rows.map((r) => Number(r.id)));
      const applied: number[] = [];
      for (const m of [...list].sort((a, b) => a.id - b.id)) {
        if (done.has(m.id)) continue;
        for (const stmt of splitStatements(m.sql)) await s.query(stmt);
        await s.query('INSERT INTO submission_manager_migrations (id, name, applied_at) VALUES (?, ?, UTC_TIMESTAMP(6))', [m.id, m.name]);
        applied.push(m.id);
      }
      return { applied };
    } finally {
      await s.query(`SELECT RELEASE_LOCK(${MIGRATION_LOCK})`).catch(() => {}); // also released when the session ends
    }
  });
}

/**
 * Cold start: one version check on the ordinary pool; only when migrations are missing, open a dedicated
 * connection (`openDedicated`, with the migration timeout instead of the request one) and migrate on it.
 */
export async function migrateMysqlIfNeeded(db: MyDatabase, openDedicated?: () => Promise<MyDatabase>,
  list: readonly Migration[] = migrations, opts: { lockTimeoutMs?: number } = {}): Promise<{ applied: number[] }> {
  if ((await schemaVersion(db)) >= Math.max(...list.map((m) => m.id))) return { applied: [] };
  if (!openDedicated) return migrateMysql(db, list, opts);
  const dedicated = await openDedicated();
  try {
    return await migrateMysql(dedicated, list, opts);
  } finally {
    await dedicated.close();
  }
}
