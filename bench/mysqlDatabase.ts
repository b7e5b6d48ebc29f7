// A scratch MySQL/MariaDB database for a benchmark: created and migrated, dropped after (BENCH_MYSQL_URL, default
// the local MariaDB's `test` database as the server to create it on).
import { randomBytes } from 'node:crypto';
import { openMysqlPool, type MyDatabase } from '../src/store/mysql/db.js';
import { createMysqlStores } from '../src/store/mysql/index.js';

export const MYSQL_URL = process.env.BENCH_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

export async function freshMysqlDatabase(): Promise<{ url: string; open(max: number): MyDatabase;
  openWith(o: { max: number; statementTimeoutMs: number }): MyDatabase; drop(): Promise<void> }> {
  const name = `bench_${randomBytes(4).toString('hex')}`;
  const admin = openMysqlPool({ url: MYSQL_URL, max: 1, statementTimeoutMs: 600_000 });
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(MYSQL_URL);
  url.pathname = `/${name}`;
  const open = (max: number) => openMysqlPool({ url: url.toString(), max, statementTimeoutMs: 600_000 });
  const m = open(1);
  await createMysqlStores(m).migrate();
  await m.close();
  const openWith = (o: { max: number; statementTimeoutMs: number }) => openMysqlPool({ url: url.toString(), ...o });
  return { url: url.toString(), open, openWith, async drop() {
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.close();
  } };
}
