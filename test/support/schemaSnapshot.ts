// What a migration leaves behind, read from the catalog and the tables, so two databases (or one database before and
// after something ran again) compare as plain values (test/store/migrationContract.test.ts):
// - schema: one text row per column (type, nullability, collation, default), index (its key and included columns,
//   uniqueness, filter), constraint (definition), sequence and routine, from the dialect's own catalog
//   (pg_catalog / information_schema / sys.*); names the server generates (SQL Server's system-named
//   constraints) are left out of the text, so two databases migrated apart still compare;
// - rows: every row of every table but the ledger, as text, sorted;
// - ledger: the migration bookkeeping rows (id and name; applied_at is when, not what).

/** Raw SQL on the database under test (`$n` placeholders). */
export type RawSql = <R = Record<string, unknown>>(text: string, params?: unknown[]) => Promise<R[]>;

export interface SchemaSnapshot {
  schema: string[];
  rows: Record<string, string[]>;
  ledger: string[];
}

export const LEDGER_TABLE = 'submission_manager_migrations';

/** PostgreSQL and PGlite: the current schema (index definitions without the schema's name). */
export const PG_SCHEMA_SQL = `SELECT d FROM (
  SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || COALESCE('(' || character_maximum_length || ')', '')
    || ' ' || is_nullable || ' ' || COALESCE(column_default, '') AS d FROM information_schema.columns WHERE table_schema = current_schema()
  UNION ALL SELECT 'index ' || tablename || ' ' || replace(indexdef, ' ' || current_schema() || '.', ' ')
    FROM pg_indexes WHERE schemaname = current_schema()
  UNION ALL SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
    FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
  UNION ALL SELECT 'sequence ' || sequence_name || ' ' || data_type FROM information_schema.sequences WHERE sequence_schema = current_schema()
  UNION ALL SELECT 'routine ' || proname || '(' || pg_get_function_identity_arguments(oid) || ')'
    FROM pg_proc WHERE pronamespace = current_schema()::regnamespace
  UNION ALL SELECT 'trigger ' || tgrelid::regclass::text || ' ' || tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal
) s`;

/** MySQL / MariaDB: the current database (check constraints joined by name: MySQL 8 has no table_name there). */
export const MYSQL_SCHEMA_SQL = `SELECT d FROM (
  SELECT CONCAT('column ', table_name, '.', column_name, ' ', column_type, ' ', is_nullable, ' ', COALESCE(collation_name, ''),
    ' ', COALESCE(column_default, ''), ' ', extra) AS d FROM information_schema.columns WHERE table_schema = DATABASE()
  UNION ALL SELECT CONCAT('index ', table_name, '.', index_name, ' ', IF(non_unique = 0, 'unique ', ''),
    GROUP_CONCAT(column_name, COALESCE(CONCAT('(', sub_part, ')'), '') ORDER BY seq_in_index))
    FROM information_schema.statistics WHERE table_schema = DATABASE() GROUP BY table_name, index_name, non_unique
  UNION ALL SELECT CONCAT('constraint ', tc.table_name, '.', tc.constraint_name, ' ', tc.constraint_type, ' ', COALESCE(cc.check_clause, ''))
    FROM information_schema.table_constraints tc LEFT JOIN information_schema.check_constraints cc
      ON cc.constraint_schema = tc.constraint_schema AND cc.constraint_name = tc.constraint_name AND tc.constraint_type = 'CHECK'
   WHERE tc.table_schema = DATABASE()
  UNION ALL SELECT CONCAT('routine ', routine_type, ' ', routine_name) FROM information_schema.routines WHERE routine_schema = DATABASE()
  UNION ALL SELECT CONCAT('trigger ', event_object_table, '.', trigger_name) FROM information_schema.triggers WHERE trigger_schema = DATABASE()
) s`;

/** SQL Server: the current database's user objects (sys.*); a system-named constraint is described without its name. */
export const MSSQL_SCHEMA_SQL = `SELECT d FROM (
  SELECT 'column ' + t.name + '.' + c.name + ' ' + ty.name
    + CASE WHEN ty.name IN ('varchar', 'char', 'varbinary', 'binary')
             THEN '(' + CASE WHEN c.max_length = -1 THEN 'max' ELSE CAST(c.max_length AS varchar(10)) END + ')'
           WHEN ty.name IN ('nvarchar', 'nchar')
             THEN '(' + CASE WHEN c.max_length = -1 THEN 'max' ELSE CAST(c.max_length / 2 AS varchar(10)) END + ')'
           WHEN ty.name IN ('datetime2', 'time', 'datetimeoffset') THEN '(' + CAST(c.scale AS varchar(10)) + ')'
           WHEN ty.name IN ('decimal', 'numeric') THEN '(' + CAST(c.precision AS varchar(10)) + ',' + CAST(c.scale AS varchar(10)) + ')'
           ELSE '' END
    + CASE WHEN c.is_nullable = 1 THEN ' NULL' ELSE ' NOT NULL' END + ISNULL(' COLLATE ' + c.collation_name, '')
    + CASE WHEN c.is_identity = 1 THEN ' IDENTITY' ELSE '' END
    + ISNULL(' DEFAULT ' + CASE WHEN dc.is_system_named = 1 THEN '' ELSE dc.name + ' ' END + dc.definition, '')
    + ISNULL(' AS ' + cc.definition, '') AS d
    FROM sys.tables t JOIN sys.columns c ON c.object_id = t.object_id JOIN sys.types ty ON ty.user_type_id = c.user_type_id
    LEFT JOIN sys.default_constraints dc ON dc.object_id = c.default_object_id
    LEFT JOIN sys.computed_columns cc ON cc.object_id = c.object_id AND cc.column_id = c.column_id
   WHERE t.is_ms_shipped = 0
  UNION ALL SELECT 'index ' + t.name + '.' + i.name + ' ' + i.type_desc + CASE WHEN i.is_unique = 1 THEN ' UNIQUE' ELSE '' END
    + CASE WHEN i.is_primary_key = 1 THEN ' PRIMARY KEY' ELSE '' END
    + ' (' + ISNULL((SELECT STRING_AGG(c.name + CASE WHEN ic.is_descending_key = 1 THEN ' DESC' ELSE '' END, ', ')
                      WITHIN GROUP (ORDER BY ic.key_ordinal)
                      FROM sys.index_columns ic JOIN sys.columns c ON c.object_id = ic.object_id AND c.column_id = ic.column_id
                     WHERE ic.object_id = i.object_id AND ic.index_id = i.index_id AND ic.is_included_column = 0), '') + ')'
    + ISNULL(' INCLUDE (' + (SELECT STRING_AGG(c.name, ', ') WITHIN GROUP (ORDER BY c.name)
                      FROM sys.index_columns ic JOIN sys.columns c ON c.object_id = ic.object_id AND c.column_id = ic.column_id
                     WHERE ic.object_id = i.object_id AND ic.index_id = i.index_id AND ic.is_included_column = 1) + ')', '')
    + ISNULL(' WHERE ' + i.filter_definition, '')
    FROM sys.indexes i JOIN sys.tables t ON t.object_id = i.object_id
   WHERE t.is_ms_shipped = 0 AND i.type > 0
  UNION ALL SELECT 'check ' + OBJECT_NAME(parent_object_id) + CASE WHEN is_system_named = 1 THEN '' ELSE '.' + name END + ' ' + definition
    FROM sys.check_constraints WHERE is_ms_shipped = 0
  UNION ALL SELECT 'key ' + OBJECT_NAME(parent_object_id) + CASE WHEN is_system_named = 1 THEN '' ELSE '.' + name END + ' ' + type_desc
    FROM sys.key_constraints WHERE is_ms_shipped = 0
  UNION ALL SELECT 'foreign key ' + OBJECT_NAME(parent_object_id) + CASE WHEN is_system_named = 1 THEN '' ELSE '.' + name END
    + ' -> ' + OBJECT_NAME(referenced_object_id) FROM sys.foreign_keys WHERE is_ms_shipped = 0
  UNION ALL SELECT 'sequence ' + s.name + ' ' + TYPE_NAME(s.user_type_id) FROM sys.sequences s WHERE s.is_ms_shipped = 0
  UNION ALL SELECT 'object ' + type_desc + ' ' + name FROM sys.objects WHERE is_ms_shipped = 0 AND type IN ('P', 'FN', 'IF', 'TF', 'TR', 'V')
) s;`;

/** A row as comparable text (column order as selected; dates as ISO text, 64-bit integers and buffers as text). */
const rowText = (row: Record<string, unknown>) => JSON.stringify(row, (_k, v: unknown) =>
  typeof v === 'bigint' ? v.toString() : Buffer.isBuffer(v) ? v.toString('hex') : v);

/** The schema, every table's rows and the ledger, as SchemaSnapshot says. `schemaSql`: one of the texts above. */
export async function snapshot(sql: RawSql, schemaSql: string): Promise<SchemaSnapshot> {
  const schema = (await sql<{ d: string }>(schemaSql)).map((r) => r.d).sort();
  const tables = [...new Set(schema.flatMap((d) => /^column (\w+)\./.exec(d)?.[1] ?? []))].sort();
  const rows: Record<string, string[]> = {};
  for (const t of tables) {
    if (t !== LEDGER_TABLE) rows[t] = (await sql(`SELECT * FROM ${t}`)).map(rowText).sort();
  }
  const ledger = tables.includes(LEDGER_TABLE)
    ? (await sql<{ id: number | string; name: string }>(`SELECT id, name FROM ${LEDGER_TABLE} ORDER BY id`)).map((r) => `${Number(r.id)} ${r.name}`)
    : [];
  return { schema, rows, ledger };
}
