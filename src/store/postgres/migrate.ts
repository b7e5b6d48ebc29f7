// Applies numbered migrations idempotently in one transaction under an advisory lock scoped to the
// current schema, so two migrators started at once serialise instead of failing.
import type { PgDatabase } from './db.js';
import { migrations, type Migration } from './migrations/index.js';

export async function migratePostgres(
  db: PgDatabase,
  list: readonly Migration[] = migrations,
): Promise<{ applied: number[] }> {
  return db.transaction(async (tx) => {
    await tx.query(`SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':submission_manager_migrations'))`);
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

/** Split a script on top-level semicolons (our migrations contain no functions or quoted semicolons). */
export function splitStatements(sql: string): string[] {
  return sql
    .split(/;\s*$/m)
    .map((s) => s.replace(/^\s*--.*$/gm, '').trim())
    .filter((s) => s.length > 0);
}
