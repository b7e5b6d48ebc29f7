// Where the MySQL / MariaDB suite runs. Reachable → it runs; unreachable → skipped locally, FAILS under CI=true.
import { randomBytes } from 'node:crypto';
import mysql from 'mysql2/promise';
import { connectionConfig, openMysqlPool } from '../../src/store/mysql/db.js';

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

/** A fresh database on the test server for `fn` (its name), dropped afterwards. */
export async function withMysqlDatabase(fn: (name: string) => Promise<void>): Promise<void> {
  const name = `m_${randomBytes(6).toString('hex')}`;
  const admin = openMysqlPool({ url: MYSQL_TEST_URL, max: 1, statementTimeoutMs: 10_000 });
  await admin.query(`CREATE DATABASE ${name}`);
  try {
    await fn(name);
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.close();
  }
}
