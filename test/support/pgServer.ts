// Where the PostgreSQL server suite runs. Reachable → it runs; unreachable → skipped locally, FAILS under CI=true.
import pg from 'pg';

export const PG_ADMIN_URL = process.env.PG_TEST_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const PG_TEST_DB = process.env.PG_TEST_DATABASE ?? 'submission_manager_test';
export const PG_TEST_URL = process.env.PG_TEST_URL ?? PG_ADMIN_URL.replace(/\/[^/?]*(\?|$)/, `/${PG_TEST_DB}$1`);
export const IN_CI = process.env.CI === 'true' || process.env.CI === '1';

/** Creates the test database if needed. Returns null when ready, or why it is unreachable. */
export async function ensurePgTestDatabase(): Promise<string | null> {
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL, connectionTimeoutMillis: 3_000 });
  try {
    await admin.connect();
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [PG_TEST_DB]);
    if (exists.rowCount === 0) {
      await admin.query(`CREATE DATABASE ${PG_TEST_DB}`).catch((e: { code?: string }) => {
        if (e.code !== '42P04' && e.code !== '23505') throw e; // created concurrently
      });
    }
    return null;
  } catch (e) {
    return `PostgreSQL server not reachable at ${PG_ADMIN_URL}: ${(e as Error).message}`;
  } finally {
    await admin.end().catch(() => {});
  }
}
