// The Azure database settings for the engines reached with an Entra token as the password (Azure Database for
// PostgreSQL / MySQL flexible servers): DATABASE_ENGINE picks the engine, DATABASE_HOST / DATABASE_NAME /
// DATABASE_USER say where and as whom, AZURE_CLIENT_ID which managed identity gets the token. Azure SQL keeps
// SQL_SERVER / SQL_DATABASE. Pure: src/config.ts turns an `error` into its ConfigError. May import: nothing of ours.

export const DATABASE_ENGINES = ['sqlserver', 'postgresql', 'mysql'] as const;
export type DatabaseEngine = (typeof DATABASE_ENGINES)[number];

/** A flexible server reached as the app's user-assigned identity (the database user is named `user`). */
export interface EntraDatabaseTarget {
  kind: 'postgresEntra' | 'mysqlEntra';
  host: string;
  port: number;
  database: string;
  user: string;
  clientId: string;
}

export interface AzureDatabaseSettings {
  DATABASE_ENGINE?: DatabaseEngine | undefined;
  DATABASE_HOST?: string | undefined;
  DATABASE_NAME?: string | undefined;
  DATABASE_USER?: string | undefined;
  SQL_SERVER?: string | undefined;
  SQL_DATABASE?: string | undefined;
  AZURE_CLIENT_ID?: string | undefined;
}

const DEFAULT_PORT = { postgresql: 5432, mysql: 3306 } as const;

/** DATABASE_URL unset: the Entra target for postgresql/mysql, null for sqlserver (or no engine), or why the
 *  settings do not fit together. */
export function azureDatabaseTarget(s: AzureDatabaseSettings): { target: EntraDatabaseTarget } | { error: string } | null {
  const engine = s.DATABASE_ENGINE;
  const own = (['DATABASE_HOST', 'DATABASE_NAME', 'DATABASE_USER'] as const).filter((k) => s[k] !== undefined);
  if (engine !== 'postgresql' && engine !== 'mysql') {
    if (own.length > 0) {
      return { error: `${own.join(', ')} ${own.length > 1 ? 'are' : 'is'} for DATABASE_ENGINE=postgresql or mysql, but DATABASE_ENGINE is ` +
        `${engine ?? 'unset (sqlserver)'}; Azure SQL is set with SQL_SERVER and SQL_DATABASE` };
    }
    if (engine === 'sqlserver' && (s.SQL_SERVER === undefined || s.SQL_DATABASE === undefined)) {
      return { error: 'DATABASE_ENGINE=sqlserver needs SQL_SERVER and SQL_DATABASE (or DATABASE_URL for a local database)' };
    }
    return null;
  }
  const sqlOnes = (['SQL_SERVER', 'SQL_DATABASE'] as const).filter((k) => s[k] !== undefined);
  if (sqlOnes.length > 0) {
    return { error: `${sqlOnes.join(' and ')} ${sqlOnes.length > 1 ? 'are' : 'is'} for DATABASE_ENGINE=sqlserver; with ` +
      `DATABASE_ENGINE=${engine} set DATABASE_HOST and DATABASE_NAME instead` };
  }
  const missing = (['DATABASE_HOST', 'DATABASE_NAME', 'DATABASE_USER', 'AZURE_CLIENT_ID'] as const).filter((k) => s[k] === undefined);
  if (missing.length > 0) {
    return { error: `DATABASE_ENGINE=${engine} needs DATABASE_HOST, DATABASE_NAME, DATABASE_USER (the identity's database user) and ` +
      `AZURE_CLIENT_ID (the managed identity whose token is the password); missing: ${missing.join(', ')}` };
  }
  const m = /^([A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)(?::(\d{1,5}))?$/.exec(s.DATABASE_HOST!);
  const port = m?.[2] ? Number(m[2]) : DEFAULT_PORT[engine];
  if (!m || port < 1 || port > 65_535) {
    return { error: `DATABASE_HOST must be a host name with an optional :port (e.g. myserver.postgres.database.azure.com), got "${s.DATABASE_HOST}"` };
  }
  return {
    target: {
      kind: engine === 'postgresql' ? 'postgresEntra' : 'mysqlEntra',
      host: m[1]!, port, database: s.DATABASE_NAME!, user: s.DATABASE_USER!, clientId: s.AZURE_CLIENT_ID!,
    },
  };
}

/** The database app settings infra/app/api.bicep writes per engine, besides AZURE_CLIENT_ID and DATABASE_ENGINE
 *  (test/unit/infra.test.ts checks both lists against each other). */
export const AZURE_DATABASE_APP_SETTINGS: Readonly<Record<DatabaseEngine, readonly string[]>> = {
  sqlserver: ['SQL_SERVER', 'SQL_DATABASE'],
  postgresql: ['DATABASE_HOST', 'DATABASE_NAME', 'DATABASE_USER'],
  mysql: ['DATABASE_HOST', 'DATABASE_NAME', 'DATABASE_USER'],
};
