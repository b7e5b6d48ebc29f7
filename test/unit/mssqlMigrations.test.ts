// SQL Server migrations without a server: batches split on GO lines as sqlcmd does, each CREATE guarded so a
// batch can run twice, the same tables and columns as the PostgreSQL migrations, datetime2(7) throughout,
// and the dialect's source free of MERGE and of any clock but SYSUTCDATETIME().
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { migrations } from '../../src/store/mssql/migrations/index.js';
import { migrations as pgMigrations } from '../../src/store/postgres/migrations/index.js';
import { MIGRATIONS_TABLE, migrateMssql, migrateQueries, splitBatches } from '../../src/store/mssql/migrate.js';
import type { MssqlDatabase, MssqlRunner } from '../../src/store/mssql/db.js';
import type { SqlQuery } from '../../src/store/mssql/params.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const stripSqlComments = (s: string) => s.replace(/--.*$/gm, '');

describe('splitBatches (sqlcmd GO semantics)', () => {
  it('splits on lines holding only GO, any case, with surrounding whitespace; the GO line is not sent', () => {
    expect(splitBatches('SELECT 1;\nGO\nSELECT 2;\n  go  \nSELECT 3;\n\tGo\n')).toEqual(['SELECT 1;', 'SELECT 2;', 'SELECT 3;']);
  });
  it('does not split on GO inside a line or on words starting with GO', () => {
    expect(splitBatches('SELECT 1 AS GO;\nGOTO done;\nSELECT 2; GO\nGO')).toEqual(['SELECT 1 AS GO;\nGOTO done;\nSELECT 2; GO']);
  });
  it('honours a repeat count and a trailing comment; drops empty and comment-only batches; handles CRLF', () => {
    expect(splitBatches('INSERT t VALUES (1);\r\nGO 2\r\n-- only a comment\r\nGO -- end\r\n\r\nGO')).toEqual(['INSERT t VALUES (1);', 'INSERT t VALUES (1);']);
  });
  it('a script without GO is one batch', () => {
    expect(splitBatches('SELECT 1;\nSELECT 2;')).toEqual(['SELECT 1;\nSELECT 2;']);
  });
});

/** Table name → column names, from CREATE TABLE bodies (one column per line). */
function tables(script: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const m of stripSqlComments(script).matchAll(/CREATE TABLE (?:IF NOT EXISTS )?(\w+) \(([\s\S]*?)\n\s*\);/g)) {
    const cols = m[2]!.split('\n').map((l) => /^\s*\[?(\w+)\]?\s+\w/.exec(l)?.[1]).filter((c): c is string => !!c)
      .filter((c) => !/^(CONSTRAINT|PRIMARY|UNIQUE|FOREIGN|CHECK)$/i.test(c));
    out.set(m[1]!, cols);
  }
  return out;
}

describe('SQL Server migrations', () => {
  const all = migrations.flatMap((m) => splitBatches(m.sql).map((b) => [m.id, b] as const));

  it('are numbered 1..n like the PostgreSQL ones', () => {
    expect(migrations.map((m) => m.id)).toEqual(pgMigrations.map((m) => m.id));
  });

  const isColumnAdd = (b: string) => /\bALTER TABLE \w+ ADD (?!CONSTRAINT\b)/i.test(stripSqlComments(b));
  const isData = (b: string) => /\bINSERT INTO\b/i.test(stripSqlComments(b)) && !/\b(CREATE|ALTER)\b/i.test(stripSqlComments(b));
  const alters = all.filter(([, b]) => /\bALTER TABLE\b/i.test(stripSqlComments(b)) && !isColumnAdd(b));
  const columnAdds = all.filter(([, b]) => isColumnAdd(b));
  const data = all.filter(([, b]) => isData(b));
  const isIndexDrop = (b: string) => /\bDROP INDEX\b/i.test(stripSqlComments(b));
  const indexDrops = all.filter(([, b]) => isIndexDrop(b));
  const creating = all.filter(([, b]) => !/\bALTER TABLE\b/i.test(stripSqlComments(b)) && !isData(b) && !isIndexDrop(b));

  it.each(indexDrops)('migration %i: an index drop is one DROP INDEX guarded by sys.indexes on that index, and its replacement comes first', (id, batch) => {
    const code = stripSqlComments(batch);
    expect(code).not.toMatch(/\bCREATE\b/i);
    expect(code.match(/\bDROP\b/gi)).toHaveLength(1);
    const m = /^\s*IF EXISTS \(SELECT 1 FROM sys\.indexes WHERE name = N'(\w+)' AND object_id = OBJECT_ID\(N'(\w+)'\)\)\s+DROP INDEX (\w+) ON (\w+);\s*$/.exec(code);
    expect(m, 'guarded DROP INDEX').not.toBeNull();
    expect([m![3], m![4]]).toEqual([m![1], m![2]]);
    // Replaced, not lost: the same migration created another index on that table in an earlier batch.
    const batches = all.filter(([i]) => i === id).map(([, b]) => stripSqlComments(b));
    const at = batches.indexOf(code);
    expect(batches.slice(0, at).some((b) => new RegExp(`\\bCREATE INDEX \\w+ ON ${m![2]}\\b`).test(b))).toBe(true);
  });

  it.each(columnAdds)('migration %i: a new column is one ALTER TABLE … ADD guarded by COL_LENGTH on that column', (_id, batch) => {
    const code = stripSqlComments(batch);
    expect(code).not.toMatch(/\bCREATE\b/i);
    expect(code.match(/\bALTER TABLE\b/gi)).toHaveLength(1);
    const m = /^\s*IF COL_LENGTH\(N'(\w+)', N'(\w+)'\) IS NULL\s+ALTER TABLE (\w+) ADD (\w+) /.exec(code);
    expect(m, 'guarded ADD').not.toBeNull();
    expect([m![3], m![4]]).toEqual([m![1], m![2]]);
    // NOT NULL only with a constant default: existing rows get it without a rewrite.
    if (/\bNOT NULL\b/i.test(code)) expect(code).toMatch(/\bDEFAULT \(\d+\)/);
  });

  it.each(data)('migration %i: a data batch is one INSERT guarded by NOT EXISTS on its key, under UPDLOCK, HOLDLOCK', (_id, batch) => {
    const code = stripSqlComments(batch);
    expect(code.match(/\bINSERT INTO\b/gi)).toHaveLength(1);
    const m = /^\s*IF NOT EXISTS \(SELECT 1 FROM (\w+) WITH \(UPDLOCK, HOLDLOCK\) WHERE [^)]*\)[\s\S]*?INSERT INTO (\w+) /.exec(code);
    expect(m, 'guarded INSERT').not.toBeNull();
    expect(m![2]).toBe(m![1]);
  });

  it.each(alters)('migration %i: a constraint change is one ALTER TABLE guarded by sys.check_constraints on that constraint', (_id, batch) => {
    const code = stripSqlComments(batch);
    expect(code).not.toMatch(/\bCREATE\b/i);
    expect(code.match(/\bALTER TABLE\b/gi)).toHaveLength(1);
    const m = /^\s*IF (NOT )?EXISTS \(SELECT 1 FROM sys\.check_constraints WHERE name = N'(\w+)'[^\n]*\)\s+ALTER TABLE \w+ (DROP|ADD) CONSTRAINT (\w+)/.exec(code);
    expect(m, 'guarded ALTER').not.toBeNull();
    expect(m![4]).toBe(m![2]);
    expect(m![1] ? 'ADD' : 'DROP').toBe(m![3]);
  });

  it.each(creating)('migration %i batch is idempotent: exactly one CREATE, guarded by an existence check on that object', (_id, batch) => {
    const code = stripSqlComments(batch);
    const creates = [...code.matchAll(/\bCREATE\s+(UNIQUE\s+)?(TABLE|SEQUENCE|INDEX)\s+(\w+)(?:\s+ON\s+(\w+))?/gi)];
    expect(creates).toHaveLength(1);
    const [, , kind, name, on] = creates[0]!;
    const guardAt = code.search(/^\s*IF\b/);
    expect(guardAt, 'batch starts with IF').toBe(0);
    if (/TABLE/i.test(kind!)) expect(code).toMatch(new RegExp(`^\\s*IF OBJECT_ID\\(N'${name}', N'U'\\) IS NULL\\s+CREATE TABLE ${name}\\b`));
    if (/SEQUENCE/i.test(kind!)) expect(code).toMatch(new RegExp(`^\\s*IF OBJECT_ID\\(N'${name}', N'SO'\\) IS NULL\\s+CREATE SEQUENCE ${name}\\b`));
    if (/INDEX/i.test(kind!)) {
      expect(code).toMatch(new RegExp(
        `^\\s*IF NOT EXISTS \\(SELECT 1 FROM sys\\.indexes WHERE name = N'${name}' AND object_id = OBJECT_ID\\(N'${on}'\\)\\)\\s+CREATE (UNIQUE )?INDEX ${name}\\s+ON ${on}\\b`));
    }
  });

  it('the migrations table DDL is guarded too', () => {
    expect(splitBatches(MIGRATIONS_TABLE)).toHaveLength(1);
    expect(MIGRATIONS_TABLE).toMatch(/^\s*IF OBJECT_ID\(N'submission_manager_migrations', N'U'\) IS NULL\s+CREATE TABLE submission_manager_migrations\b/);
  });

  it('create the same tables and columns as the PostgreSQL migrations', () => {
    const ms = tables(migrations.map((m) => m.sql).join('\n'));
    const pg = tables(pgMigrations.map((m) => m.sql).join('\n'));
    expect([...ms.keys()].sort()).toEqual([...pg.keys()].sort());
    for (const [name, cols] of pg) expect(ms.get(name), name).toEqual(cols);
  });

  it('add the same columns to existing tables as the PostgreSQL migrations', () => {
    const added = (script: string) => [...stripSqlComments(script).matchAll(/ALTER TABLE (\w+) ADD (?:COLUMN IF NOT EXISTS )?(?!CONSTRAINT\b)(\w+) /g)]
      .map((m) => `${m[1]}.${m[2]}`);
    const pg = added(pgMigrations.map((m) => m.sql).join('\n'));
    expect(pg).toContain('submission_intents.partition_no');
    expect(added(migrations.map((m) => m.sql).join('\n'))).toEqual(pg);
  });

  const ddl = migrations.map((m) => stripSqlComments(m.sql)).join('\n') + MIGRATIONS_TABLE;
  it('use datetime2(7) for every time column (no datetime, datetimeoffset or unscaled datetime2)', () => {
    expect(ddl).not.toMatch(/\b(datetime|smalldatetime|datetimeoffset)\b/i);
    expect(ddl.match(/\bdatetime2\b(?!\(7\))/gi)).toBeNull();
    // Every timestamptz column of the PostgreSQL schema is a datetime2(7) column here.
    const pgTimes = pgMigrations.map((m) => m.sql).join('\n').match(/\btimestamptz\b/g)!.length;
    expect(migrations.map((m) => m.sql).join('\n').match(/\bdatetime2\(7\)/g)!.length).toBe(pgTimes);
  });

  it('one sequence numbers lease events and the fenced-write audit', () => {
    expect(ddl).toMatch(/CREATE SEQUENCE submission_manager_audit_seq AS bigint/);
    expect(ddl.match(/DEFAULT \(NEXT VALUE FOR submission_manager_audit_seq\)/g)).toHaveLength(2);
  });

  it('one acquired event per (lease_name, lease_epoch), and idempotency keys unique only when present (filtered indexes)', () => {
    expect(ddl).toMatch(/CREATE UNIQUE INDEX ux_lease_events_acquired\s+ON submission_manager_lease_events \(lease_name, lease_epoch\) WHERE \[event\] = 'acquired'/);
    expect(ddl).toMatch(/CREATE UNIQUE INDEX ux_intents_idempotency_key\s+ON submission_intents \(idempotency_key\) WHERE idempotency_key IS NOT NULL/);
    expect(ddl).not.toMatch(/idempotency_key[^\n]*\bUNIQUE\b/);
  });

  it('partition changes (m013): preparing is a state and counts as active (one not-completed row); the prepare cursor compares like intent_id', () => {
    expect(ddl).toMatch(/CHECK \(state IN \('preparing', 'pending', 'reassigning', 'completed'\)\)/);
    expect(ddl).toMatch(/CREATE UNIQUE INDEX ux_partition_changes_active\s+ON submission_manager_partition_changes \(completed_at\) WHERE state <> 'completed';/);
    expect(ddl).toMatch(/prepare_cursor char\(36\)\s+COLLATE Latin1_General_100_BIN2 NULL,\n\s+prepared_at\s+datetime2\(7\) NULL,/);
  });

  it('intent ids are char(36) text with a binary collation (plain string order), never uniqueidentifier', () => {
    expect(ddl).not.toMatch(/uniqueidentifier/i);
    expect(ddl.match(/intent_id\s+char\(36\)\s+COLLATE Latin1_General_100_BIN2/g)).toHaveLength(3);
  });
});

describe('migrateMssql', () => {
  it('takes a transaction-owned exclusive sp_getapplock first, then applies each pending batch and records it', async () => {
    const calls: string[] = [];
    let inTx = false;
    const runner: MssqlRunner = {
      async run<R>(q: SqlQuery): Promise<R[][]> {
        expect(inTx).toBe(true);
        calls.push(`run:${q.text.split('\n')[0]}`);
        return (q.text.startsWith('SELECT id') ? [[{ id: 0 }]] : [[]]) as R[][];
      },
      async runBatch(text: string) {
        expect(inTx).toBe(true);
        calls.push(`batch:${text.trim().split('\n')[0]}`);
      },
    };
    const db = {
      ...runner,
      async transaction<T>(fn: (tx: MssqlRunner) => Promise<T>) {
        inTx = true;
        try {
          return await fn(runner);
        } finally {
          inTx = false;
        }
      },
    } as unknown as MssqlDatabase;
    const out = await migrateMssql(db);
    expect(out.applied).toEqual(migrations.map((m) => m.id));
    expect(calls[0]).toBe('run:DECLARE @lock_result int;');
    expect(calls[1]).toMatch(/^batch:IF OBJECT_ID\(N'submission_manager_migrations'/);
    expect(calls.filter((c) => c.startsWith('batch:')).length).toBe(1 + migrations.reduce((n, m) => n + splitBatches(m.sql).length, 0));
    expect(calls.at(-1)).toBe('run:INSERT INTO submission_manager_migrations (id, name) VALUES (@id, @name);');
    const lock = migrateQueries.lock(1_000).text;
    expect(lock).toMatch(/sp_getapplock @Resource = N'submission_manager_migrations', @LockMode = 'Exclusive',\s+@LockOwner = 'Transaction'/);
    expect(lock).toMatch(/IF @lock_result < 0\s+THROW/);
  });
});

describe('src/store/mssql source', () => {
  const walk = (dir: string): string[] => readdirSync(dir).flatMap((e) => {
    const f = join(dir, e);
    return statSync(f).isDirectory() ? walk(f) : [f];
  });
  const files = walk(join(root, 'src/store/mssql')).filter((f) => f.endsWith('.ts'));
  /** Code with // and /* comments and SQL -- comments removed (so prose may name what the code avoids). */
  const codeOf = (f: string) => readFileSync(f, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:])\/\/.*$/gm, '$1').replace(/--.*$/gm, '');

  it.each(files.map((f) => [f.slice(root.length + 1), f]))('%s: no MERGE, no clock but SYSUTCDATETIME(), under 300 lines', (_rel, f) => {
    const c = codeOf(f);
    expect(c).not.toMatch(/\bMERGE\b/i);
    expect(c).not.toMatch(/\b(GETDATE|GETUTCDATE|SYSDATETIME|SYSDATETIMEOFFSET|CURRENT_TIMESTAMP)\b/i);
    expect(readFileSync(f, 'utf8').split('\n').length).toBeLessThanOrEqual(300);
  });

  it('only the runner binds parameters, always with an explicit type', () => {
    const binders = files.filter((f) => /\.input\(/.test(codeOf(f)));
    expect(binders.map((f) => f.slice(root.length + 1))).toEqual(['src/store/mssql/db.ts']);
    const inputs = [...codeOf(binders[0]!).matchAll(/\.input\(([^)]*)\)/g)].map((m) => m[1]);
    expect(inputs).toEqual(['param.name, param.type, param.value']);
  });

  it('uses SYSUTCDATETIME()', () => {
    expect(files.some((f) => /SYSUTCDATETIME\(\)/.test(codeOf(f)))).toBe(true);
  });
});

// The spec's data model, column by column (issue 13: the exact types were never asserted).
describe('SQL Server migrations: the spec column types', () => {
  const script = migrations.map((m) => stripSqlComments(m.sql)).join('\n');
  /** `column type … NOT NULL` line of a table's CREATE TABLE body. */
  const columnLine = (table: string, column: string) => {
    const body = new RegExp(`CREATE TABLE ${table} \\(([\\s\\S]*?)\\n\\s*\\);`).exec(script)?.[1] ?? '';
    return body.split('\n').find((l) => new RegExp(`^\\s*${column}\\s`).test(l))?.trim() ?? '';
  };
  it.each([
    ['submission_manager_leases', 'lease_name', 'varchar(64)'],
    ['submission_manager_leases', 'holder_id', 'varchar(128)'],
    ['submission_manager_leases', 'lease_epoch', 'bigint'],
    ['submission_manager_leases', 'acquired_at', 'datetime2(7)'],
    ['submission_manager_leases', 'renewed_at', 'datetime2(7)'],
    ['submission_manager_leases', 'expires_at', 'datetime2(7)'],
    ['submission_intents', 'last_modified_at', 'datetime2(7)'],
  ])('%s.%s is %s NOT NULL', (table, column, type) => {
    const line = columnLine(table, column);
    expect(line.split(/\s+/)[1]).toBe(type);
    expect(line).toMatch(/\bNOT NULL\b/);
  });
  it('lease_name is the primary key', () => {
    expect(columnLine('submission_manager_leases', 'lease_name')).toMatch(/PRIMARY KEY/);
  });
});

describe('SQL Server migrations: the cold-start version check', () => {
  it('is one read guarded by OBJECT_ID (a fresh database answers 0 instead of failing)', () => {
    const t = migrateQueries.version().text;
    expect(t).toMatch(/^IF OBJECT_ID\(N'submission_manager_migrations', N'U'\) IS NULL\s+SELECT CAST\(0 AS int\) AS v;\s+ELSE\s+SELECT ISNULL\(MAX\(id\), 0\) AS v FROM submission_manager_migrations;$/);
    expect(t).not.toMatch(/\b(INSERT|UPDATE|DELETE|CREATE)\b/);
  });
});
