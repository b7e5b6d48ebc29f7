// Where the MySQL / MariaDB suite runs. Reachable → it runs; unreachable → skipped locally, FAILS under CI=true.
import mysql from 'mysql2/promise';
import { connectionConfig } from '../../src/store/mysql/db.js';

export const MYSQL_TEST_URL = process.env.MYSQL_TEST_URL ?? 'mysql://root@127.0.0.1:3306/test';

/** null when the server answers, otherwise why it is unreachable. */
export async function checkMysqlServer(): Promise<string | null> {
  let c: mysql.Connection | undefined;
  try {
    c = await mysql.createConnection({ ...connectionConfig(MYSQL_TEST_URL), connectTimeout: 3_000 });
    await c.query('SELECT 1');
    return null;
  } catch (e) {
    return `MySQL/MariaDB server not reachable at ${MYSQL_TEST_URL.replace(/\/\/[^@/]*@/, '//')}: ${(e as Error).message}`;
  } finally {
    await c?.end().catch(() => {});
  }
}

/** PostgreSQL-style `$n` placeholders (the shared suites' raw SQL) → `?` with the parameters in order. */
export function positional(text: string, params: unknown[] = []): { text: string; params: unknown[] } {
  const out: unknown[] = [];
  const sql = text.replace(/\$(\d+)\b/g, (_, n: string) => {
    out.push(params[Number(n) - 1]);
    return '?';
  });
  return { text: sql, params: out.length > 0 ? out : params };
}
