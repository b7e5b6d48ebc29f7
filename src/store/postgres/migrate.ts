// Applies numbered migrations idempotently in one transaction under an advisory lock scoped to the
// current schema, so two migrators started at once serialise instead of failing.
import type { PgDatabase, PgQueryable } from './db.js';
import { migrations, type Migration } from './migrations/index.js';
import { isStoreError } from '../ports.js';
import { splitStatements } from '../sqlScript.js';

/** The lock every migrator of this schema takes first (transaction-scoped advisory lock): one runs at a time. */
export const MIGRATION_LOCK_SQL = `SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':submission_manager_migrations'))`;

/** The newest migration applied (0: none yet): one primary-key read, cheap enough for every cold start. */
export async function schemaVersion(db: PgQueryable): Promise<number> {
  try {
    const r = await db.query<{ v: number | null }>('SELECT max(id) AS v FROM submission_manager_migrations');
    return Number(r.rows[0]?.v ?? 0);
  } catch (e) {
    if (isStoreError(e) && e.code === '42P01') return 0; // undefined_table: a fresh database
    throw e;
  }
}

/**
 * Cold start: one version check on the ordinary pool; only when migrations are missing, open a dedicated
 * connection (`openDedicated`, with the migration timeout instead of the request one) and migrate on it.
 * Without `openDedicated` (PGlite: one session) the same database is used.
 */
export async function migratePostgresIfNeeded(
  db: PgDatabase,
  openDedicated?: () => Promise<PgDatabase>,
  list: readonly Migration[] = migrations,
): Promise<{ applied: number[] }> {
  if ((await schemaVersion(db)) >= Math.max(...list.map((m) => m.id))) return { applied: [] };
  if (!openDedicated) return migratePostgres(db, list);
  const dedicated = await openDedicated();
  try {
    return await migratePostgres(dedicated, list);
  } finally {
    await dedicated.close();
  }
}

export async function migratePostgres(
  db: PgDatabase,
  list: readonly Migration[] = migrations,
): Promise<{ applied: number[] }> {
  return db.transaction(async (tx) => {
    await tx.query(MIGRATION_LOCK_SQL);
    await tx.query(`CREATE TABLE IF NOT EXISTS submission_manager_migrations (
      id integer PRIMARY KEY, name varchar(128) NOT NULL, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`);
    const done = new Set(
      (await tx.query<{ id: number }>('SELECT id FROM submission_manager_migrations')).rows.map((r) => Number(r.id)),
    );
    const applied: number[] = [];
    for (const m of [...list].sort((a, b) => a.id - b.id)) {
      if (done.has(m.id)) continue;
      for (const stmt of splitStatements(m.sql)) await tx.query(stmt);
      await tx.query('INSERT INTO submission_manager_migrations (id, name) VALUES ($1, $2)', [m.id, m.name]);
      applied.push(m.id);
    }
    return { applied };
  });
}
