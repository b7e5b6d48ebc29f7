// The one place that reads process.env. Every setting, its default and its relational rules live here;
// bad configuration fails at start with a message that names the setting(s).
// May import: `limits.ts` (the limits its relational checks relate), `azureDatabase.ts`.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import {
  DEFAULT_MAINTENANCE, INVOCATION_MARGIN_MS, MIN_TICK_BUDGET_MS, PROVIDER_POOL_CONNECTIONS, closingReserveMs, shortestPeriodMs,
  type GuardSettings, type MaintenanceSettings,
} from './limits.js';
import { azureDatabaseTarget, DATABASE_ENGINES, type EntraDatabaseTarget } from './azureDatabase.js';

/** Connections the leader may hold at once: the lease renew, a batch statement, the maintenance purge. */
export const LEADER_DB_CONNECTIONS = 3;

/** EXECUTOR_PARTITIONS at most. Each partition will be a lease row renewed on its own, a timer function with its own
 *  listener lock on Azure and a leader holding up to LEADER_DB_CONNECTIONS connections: 64 partitions are already
 *  192 leader connections (beyond a small server's limit) and more leaders than a Flex app usually runs instances.
 *  The stored partition is a smallint, so raising this takes a measurement, not a migration. */
export const MAX_EXECUTOR_PARTITIONS = 64;

const intMs = (def: number, min = 1) => z.coerce.number().int().min(min).default(def);

/** Input schema: raw environment strings (all optional; defaults documented per field). */
export const settingsSchema = z.object({
  /** Backend: `pglite:` (in-memory), `pglite:<dir>`, `postgres://…`, `mssql://user:pass@host:1433/db`,
   *  `mysql://user:pass@host:3306/db` (also `mariadb://`; `?ssl=true|false`, default on unless the host is local).
   *  Unset + SQL_SERVER set → Azure SQL with Entra auth. Unset otherwise → `pglite:` (in-memory). */
  DATABASE_URL: z.string().trim().min(1).optional(),
  /** Azure SQL server host name (Entra auth, `azure-active-directory-default`). */
  SQL_SERVER: z.string().trim().min(1).optional(),
  /** Azure SQL database name; required with SQL_SERVER. */
  SQL_DATABASE: z.string().trim().min(1).optional(),
  /** Client id of a user-assigned managed identity (Entra auth); required with DATABASE_ENGINE postgresql/mysql. */
  AZURE_CLIENT_ID: z.string().trim().min(1).optional(),
  /** Azure engine when DATABASE_URL is unset: sqlserver (SQL_SERVER + SQL_DATABASE, the default), postgresql or
   *  mysql (DATABASE_HOST + DATABASE_NAME + DATABASE_USER, an Entra token as the password; src/azureDatabase.ts). */
  DATABASE_ENGINE: z.enum(DATABASE_ENGINES).optional(),
  /** Flexible server host name, optionally `:port` (DATABASE_ENGINE postgresql/mysql). */
  DATABASE_HOST: z.string().trim().min(1).optional(),
  /** Database name on that server. */
  DATABASE_NAME: z.string().trim().min(1).optional(),
  /** The database user mapped to the AZURE_CLIENT_ID identity (infra/: the identity's name). */
  DATABASE_USER: z.string().trim().min(1).optional(),
  /** Lease row name; one executor per name. Default `submission-manager-executor`. */
  LEASE_NAME: z.string().trim().min(1).max(64).default('submission-manager-executor'),
  /** This instance's identity. Default `hostname-pid-random`. */
  HOLDER_ID: z.string().trim().min(1).max(128).optional(),
  /** Lease duration (default 60 000 ms). */
  LEASE_DURATION_MS: intMs(60_000, 100),
  /** Renew interval (default 20 000 ms; must be < LEASE_DURATION_MS). */
  LEASE_RENEW_INTERVAL_MS: intMs(20_000, 10),
  /** Caps a follower's wait *inside one tick* for the expiry it observed, and (min with 1 s) after an acquire error
   *  (default 30 000 ms). Not a back-off: followers try once per timer tick whatever it says (README, settings). */
  LEASE_ACQUIRE_INTERVAL_MS: intMs(30_000, 10),
  /** The leader stops acting this long before its local deadline (default: min(5 000, duration/4) ms). */
  LEASE_SAFETY_MARGIN_MS: z.coerce.number().int().min(0).optional(),
  /** Random delay added to a follower's retry after the observed expiry (default 250 ms). */
  LEASE_ACQUIRE_JITTER_MS: intMs(250, 0),
  /** Incremental schedule refresh interval (default 1 000 ms). */
  SCHEDULE_REFRESH_INTERVAL_MS: intMs(1_000, 10),
  /** Rows per refresh page (default 500). */
  SCHEDULE_REFRESH_PAGE_SIZE: intMs(500, 1),
  /** The refresh cursor only advances over rows older than db_now − this (default 5 000 ms);
   *  must exceed the longest writer transaction (DB_STATEMENT_TIMEOUT_MS). */
  COMMIT_GRACE_MS: intMs(5_000, 0),
  /** Full reconcile of the schedule, defence in depth against late commits (default 60 000 ms). */
  SCHEDULE_RECONCILE_INTERVAL_MS: intMs(60_000, 100),
  /** Executor timer, 6-field NCRONTAB (default every 10 s). */
  EXECUTOR_SCHEDULE: z.string().trim().min(1).default('*/10 * * * * *'),
  /** Cap on one tick's wall-clock budget; a tick ends EXECUTOR_TICK_HANDOFF_MS before the timer's next
   *  occurrence, so a leader executes without a gap between ticks (default: the largest the lease allows,
   *  LEASE_DURATION_MS − PROVIDER_TIMEOUT_MS − LEASE_SAFETY_MARGIN_MS − 1 000). */
  EXECUTOR_TICK_BUDGET_MS: z.coerce.number().int().min(10).optional(),
  /** PostgreSQL/PGlite: intent writes NOTIFY and the leader LISTENs, so a due intent is picked up in milliseconds
   *  (default on; off e.g. behind a transaction-mode pooler that cannot LISTEN). The refresh interval bounds it either way. */
  DUE_NOTICES: z.enum(['on', 'off']).default('on'),
  /** A tick ends this long before the timer's next occurrence (default 250 ms), so that occurrence is not skipped. */
  EXECUTOR_TICK_HANDOFF_MS: intMs(250, 0),
  /** host.json functionTimeout (default 60 000 ms; keep them equal): one timer invocation, and a shutdown, end
   *  5 s before it, whatever the database does. */
  FUNCTION_TIMEOUT_MS: intMs(60_000, 1_000),
  /** No longer used (accepted, warned about at start): a leader executes from tick to tick without a pause, so
   *  a per-tick cap only left it idle; EXECUTOR_CONCURRENCY and PROVIDER_RATE_LIMIT_PER_SEC bound execution. */
  EXECUTOR_MAX_ATTEMPTS_PER_TICK: z.string().optional(),
  /** Executor partitions P (default 1, 1..MAX_EXECUTOR_PARTITIONS): each intent is assigned partition 0..P−1 at
   *  insert (src/intents/partition.ts). The database records P; a process started with another P refuses to start. */
  EXECUTOR_PARTITIONS: z.coerce.number({ error: `must be an integer from 1 to ${MAX_EXECUTOR_PARTITIONS}` })
    .int(`must be an integer from 1 to ${MAX_EXECUTOR_PARTITIONS}`)
    .min(1, `must be an integer from 1 to ${MAX_EXECUTOR_PARTITIONS}`)
    .max(MAX_EXECUTOR_PARTITIONS, `must be an integer from 1 to ${MAX_EXECUTOR_PARTITIONS}`).default(1),
  /** Provider calls in flight at once (default 16; at most the provider pool's PROVIDER_POOL_CONNECTIONS, 256). */
  EXECUTOR_CONCURRENCY: intMs(16, 1),
  /** Provider endpoint; empty → the local host's demo provider (Azure: must be set to execute). */
  PROVIDER_URL: z.string().trim().optional(),
  /** Provider protection (src/provider/guard.ts), provider-wide on the leader; held-back calls never start an
   *  attempt. Calls per second at most (default 0 = unlimited). */
  PROVIDER_RATE_LIMIT_PER_SEC: z.coerce.number().min(0).max(100_000).default(0),
  /** Provider calls in flight at most (default 0 = EXECUTOR_CONCURRENCY); must not exceed EXECUTOR_CONCURRENCY. */
  PROVIDER_MAX_IN_FLIGHT: z.coerce.number().int().min(0).default(0),
  /** Consecutive retryable failures (timeouts, 408/429/5xx) that open the circuit breaker (default 10; 0 = off). */
  PROVIDER_BREAKER_THRESHOLD: z.coerce.number().int().min(0).max(10_000).default(10),
  /** How long an open breaker sends nothing before one probe call (default 30 000 ms). */
  PROVIDER_BREAKER_COOLDOWN_MS: intMs(30_000, 1),
  /** Cap on the provider-wide pause a 429/503 Retry-After asks for (default 60 000 ms). */
  PROVIDER_RETRY_AFTER_MAX_MS: intMs(60_000, 0),
  /** Per-attempt provider timeout (default 10 000 ms); never runs past the lease deadline. */
  PROVIDER_TIMEOUT_MS: intMs(10_000, 1),
  /** Retry backoff base and cap (defaults 1 000 / 300 000 ms), exponential with full jitter. */
  RETRY_BASE_DELAY_MS: intMs(1_000, 1),
  RETRY_MAX_DELAY_MS: intMs(300_000, 1),
  /** Default max attempts when a submit does not say (default 5, 1..50). */
  DEFAULT_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(50).default(5),
  /** Database pool size per process (default 10; at least LEADER_DB_CONNECTIONS, 3). */
  DB_POOL_MAX: intMs(10, 1),
  /** Statement and idle-in-transaction timeout for our sessions (default 3 000 ms). */
  DB_STATEMENT_TIMEOUT_MS: intMs(3_000, 100),
  /** Migrations run on their own connection with this statement timeout (default 120 000 ms); a cold start
   *  whose schema is current costs one cheap version check on the ordinary pool instead. */
  DB_MIGRATION_TIMEOUT_MS: intMs(120_000, 1_000),
  /** pino level (default info). */
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Retention: terminal intents (succeeded, failed, cancelled) and their attempts are purged by the leader,
   *  in bounded fenced batches, once their last change is older than this many days (default 30; 0 = keep
   *  forever). Active intents (scheduled, in_flight) are never purged. */
  RETENTION_DAYS: z.coerce.number().int().min(0).max(36_500).default(30),
  /** Tracing (src/observability/tracing.ts): `off` (default), `console`, or `otlp` (OTLP/HTTP). With
   *  APPLICATIONINSIGHTS_CONNECTION_STRING set, spans go to Azure Monitor instead and this must stay `off`. */
  TRACING: z.enum(['off', 'console', 'otlp']).default('off'),
  /** OTLP/HTTP traces endpoint for TRACING=otlp (default: the exporter's, OTEL_EXPORTER_OTLP_* or http://localhost:4318/v1/traces). */
  TRACING_OTLP_URL: z.url({ protocol: /^https?$/ }).optional(),
  /** Application Insights connection string (Azure): when set, metrics are also exported through
   *  @azure/monitor-opentelemetry (`useAzureMonitor`); /api/metrics serves them either way. */
  APPLICATIONINSIGHTS_CONNECTION_STRING: z.string().trim().min(1).optional(),
  /** `Authorization=AAD[;ClientId=<user-assigned identity>]`: export telemetry with a managed identity token
   *  (required when the Application Insights resource disables local auth, as infra/ provisions it). */
  APPLICATIONINSIGHTS_AUTHENTICATION_STRING: z.string().trim().min(1).optional(),
});

export type SettingsInput = z.input<typeof settingsSchema>;

export type DatabaseTarget =
  | { kind: 'pglite'; dataDir: string | null }
  | { kind: 'postgres'; url: string }
  | { kind: 'mssql'; url: string }
  | { kind: 'mysql'; url: string }
  | { kind: 'mssqlEntra'; server: string; database: string; clientId: string | null }
  | EntraDatabaseTarget;

/** Resolved configuration: every value decided, relational rules checked. */
export interface Config {
  /** Settings still accepted but no longer used (the app warns once at start, naming each). */
  ignoredSettings: string[];
  database: DatabaseTarget;
  lease: {
    name: string;
    holderId: string;
    durationMs: number;
    renewIntervalMs: number;
    acquireIntervalMs: number;
    safetyMarginMs: number;
    acquireJitterMs: number;
  };
  schedule: { refreshIntervalMs: number; pageSize: number; commitGraceMs: number; reconcileIntervalMs: number };
  /** tickBudgetMs caps a tick; handoffMs: a tick ends this long before the schedule's next occurrence. */
  executor: { schedule: string; tickBudgetMs: number; handoffMs: number; concurrency: number;
    /** One invocation (and a shutdown) ends within this (host.json functionTimeout less a margin); a tick may run
     *  closingReserveMs past its budget. */
    invocationLimitMs: number; closingReserveMs: number;
    /** Wake the leader on due-intent notices where the dialect has them (DUE_NOTICES). */
    dueNotices: boolean };
  provider: { url: string | null; timeoutMs: number };
  /** EXECUTOR_PARTITIONS: intents are assigned partitions 0..count−1; the database records the count. */
  partitions: { count: number };
  /** Provider protection (see src/provider/guard.ts); maxInFlight resolved (never 0). */
  providerGuard: GuardSettings;
  retry: { baseDelayMs: number; maxDelayMs: number; defaultMaxAttempts: number };
  db: { poolMax: number; statementTimeoutMs: number; migrationTimeoutMs: number };
  logLevel: z.infer<typeof settingsSchema>['LOG_LEVEL'];
  /** Retention purge: `olderThanMs` 0 = disabled; at most `batchSize` intents per fenced statement and
   *  `maxBatchesPerTick` statements per leader tick, at most once per `intervalMs`. */
  retention: { days: number; olderThanMs: number; batchSize: number; maxBatchesPerTick: number; intervalMs: number };
  /** Leader-only maintenance (src/executor/maintenance.ts): the tick's end slice and the failure back-off. */
  maintenance: MaintenanceSettings;
  /** `aad` set: export with a managed identity token (clientId null = system-assigned). */
  telemetry: { appInsightsConnectionString: string | null; aad: { clientId: string | null } | null };
  /** Our own tracer provider (off when Azure Monitor's is used). */
  tracing: { mode: 'off' | 'console' | 'otlp'; otlpUrl: string | null };
}

/** Settings the app needs in Azure (checked against infra/app/api.bicep by test/unit/infra.test.ts). */
export const AZURE_APP_SETTINGS: readonly string[] = [
  'AzureWebJobsStorage__accountName', 'AzureWebJobsStorage__credential', 'AzureWebJobsStorage__clientId',
  'APPLICATIONINSIGHTS_CONNECTION_STRING', 'AZURE_CLIENT_ID', 'DATABASE_ENGINE',
  'LEASE_NAME', 'LEASE_DURATION_MS', 'LEASE_RENEW_INTERVAL_MS', 'LEASE_ACQUIRE_INTERVAL_MS',
  'SCHEDULE_REFRESH_INTERVAL_MS', 'COMMIT_GRACE_MS', 'EXECUTOR_SCHEDULE', 'EXECUTOR_TICK_BUDGET_MS',
  'EXECUTOR_CONCURRENCY', 'PROVIDER_URL', 'PROVIDER_TIMEOUT_MS', 'LOG_LEVEL',
  'RETENTION_DAYS',
];

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Default holder id: `hostname-pid-random`, as the spec says. */
export function defaultHolderId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`.slice(0, 128);
}

function parseDatabase(s: z.infer<typeof settingsSchema>): DatabaseTarget {
  const url = s.DATABASE_URL;
  if (url === undefined) {
    const azure = azureDatabaseTarget(s);
    if (azure && 'error' in azure) throw new ConfigError(azure.error);
    if (azure) return azure.target;
    if (s.SQL_SERVER !== undefined || s.SQL_DATABASE !== undefined) {
      if (s.SQL_SERVER === undefined || s.SQL_DATABASE === undefined) {
        throw new ConfigError('SQL_SERVER and SQL_DATABASE must be set together (Entra authentication to Azure SQL)');
      }
      return { kind: 'mssqlEntra', server: s.SQL_SERVER, database: s.SQL_DATABASE, clientId: s.AZURE_CLIENT_ID ?? null };
    }
    return { kind: 'pglite', dataDir: null };
  }
  // DATABASE_URL wins over DATABASE_ENGINE (a copied Azure setting); a server setting beside it is a mistake.
  if (s.SQL_SERVER !== undefined || s.DATABASE_HOST !== undefined) {
    throw new ConfigError(`DATABASE_URL and ${s.SQL_SERVER !== undefined ? 'SQL_SERVER' : 'DATABASE_HOST'} are both set: choose one backend`);
  }
  if (/authentication\s*=/i.test(url)) {
    throw new ConfigError(
      'DATABASE_URL: .NET-style "Authentication=Active Directory ..." connection strings are not supported ' +
        '(the mssql driver would silently use a password login); set SQL_SERVER and SQL_DATABASE for Entra auth',
    );
  }
  if (url === 'pglite:' || url === 'pglite://' || url === 'pglite:memory') return { kind: 'pglite', dataDir: null };
  if (url.startsWith('pglite:')) return { kind: 'pglite', dataDir: url.slice('pglite:'.length).replace(/^\/\//, '') };
  if (/^postgres(ql)?:\/\//.test(url)) return { kind: 'postgres', url };
  if (/^(mssql|sqlserver):\/\//.test(url)) return { kind: 'mssql', url };
  if (/^(mysql|mariadb):\/\//.test(url)) return { kind: 'mysql', url };
  // Name only the scheme: an unrecognised string may carry a password in a shape redactUrl cannot know
  // (`Password=…;`, `scheme:user:pw@host`).
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1];
  throw new ConfigError(
    `DATABASE_URL: ${scheme ? `unsupported scheme "${scheme}:"` : 'not a URL'}; expected pglite:, pglite:<dir>, postgres://…, mssql://… or mysql://…`,
  );
}

/** `Authorization=AAD;ClientId=<id>` (the Functions host's format) → managed identity; anything else is an error. */
function parseAppInsightsAuth(value: string | undefined): { clientId: string | null } | null {
  if (value === undefined) return null;
  const parts = Object.fromEntries(value.split(';').filter((p) => p.trim()).map((p) => {
    const i = p.indexOf('=');
    return [p.slice(0, i).trim().toLowerCase(), p.slice(i + 1).trim()];
  }));
  check(parts.authorization?.toUpperCase() === 'AAD',
    'APPLICATIONINSIGHTS_AUTHENTICATION_STRING must be "Authorization=AAD" optionally with ";ClientId=<managed identity client id>"');
  return { clientId: parts.clientid || null };
}

/** The telemetry settings alone: the preload (src/instrument/telemetryPreload.ts) needs them before anything
 *  else loads; the full configuration is validated when the app starts. Throws ConfigError like loadConfig. */
export function loadTelemetryConfig(env: Record<string, string | undefined> = process.env): Config['telemetry'] {
  const cs = env.APPLICATIONINSIGHTS_CONNECTION_STRING?.trim() || null;
  return { appInsightsConnectionString: cs, aad: parseAppInsightsAuth(env.APPLICATIONINSIGHTS_AUTHENTICATION_STRING?.trim() || undefined) };
}

/** Hide credentials before a URL reaches an error message or a log line. */
export function redactUrl(url: string): string {
  // The password runs to the LAST '@' (a raw '@' or '/' in it must not leak a part); over-redacting is safe.
  return url.replace(/\/\/([^:@/?#]*):.*@/, '//$1:***@').replace(/\b(password|pwd)\s*=[^;&]*/gi, '$1=***');
}

function check(cond: boolean, message: string): void {
  if (!cond) throw new ConfigError(message);
}

/** Parse and resolve settings; throws ConfigError naming the offending setting(s). */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // Blank strings (empty or whitespace only) count as unset, as app settings often carry blanks; a
  // whitespace-only number would otherwise coerce to 0 (e.g. LEASE_SAFETY_MARGIN_MS=" " → no margin).
  const raw = Object.fromEntries(
    Object.keys(settingsSchema.shape).map((k) => [k, env[k]?.trim() === '' ? undefined : env[k]]),
  );
  const parsed = settingsSchema.safeParse(raw);
  if (!parsed.success) {
    const msgs = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration: ${msgs.join('; ')}`);
  }
  const s = parsed.data;
  const durationMs = s.LEASE_DURATION_MS;
  const safetyMarginMs = s.LEASE_SAFETY_MARGIN_MS ?? Math.min(5_000, Math.floor(durationMs / 4));
  const tickBudgetMs = s.EXECUTOR_TICK_BUDGET_MS ?? durationMs - s.PROVIDER_TIMEOUT_MS - safetyMarginMs - 1_000;
  const budgetName = s.EXECUTOR_TICK_BUDGET_MS === undefined ? 'EXECUTOR_TICK_BUDGET_MS (default)' : 'EXECUTOR_TICK_BUDGET_MS';
  check(s.LEASE_RENEW_INTERVAL_MS < durationMs,
    `LEASE_RENEW_INTERVAL_MS (${s.LEASE_RENEW_INTERVAL_MS}) must be less than LEASE_DURATION_MS (${durationMs})`);
  check(safetyMarginMs < durationMs,
    `LEASE_SAFETY_MARGIN_MS (${safetyMarginMs}) must be less than LEASE_DURATION_MS (${durationMs})`);
  check(s.LEASE_RENEW_INTERVAL_MS + safetyMarginMs < durationMs,
    `LEASE_RENEW_INTERVAL_MS (${s.LEASE_RENEW_INTERVAL_MS}) + LEASE_SAFETY_MARGIN_MS (${safetyMarginMs}) must be less than ` +
      `LEASE_DURATION_MS (${durationMs}), or the leader reaches its local deadline before it renews`);
  check(tickBudgetMs >= 10,
    `${budgetName} (${tickBudgetMs}) must be at least 10: LEASE_DURATION_MS (${durationMs}) leaves no room for a tick after ` +
      `PROVIDER_TIMEOUT_MS (${s.PROVIDER_TIMEOUT_MS}) and LEASE_SAFETY_MARGIN_MS (${safetyMarginMs})`);
  check(tickBudgetMs + safetyMarginMs < durationMs,
    `${budgetName} (${tickBudgetMs}) + LEASE_SAFETY_MARGIN_MS (${safetyMarginMs}) must be less than ` +
      `LEASE_DURATION_MS (${durationMs})`);
  check(tickBudgetMs + s.PROVIDER_TIMEOUT_MS + safetyMarginMs < durationMs,
    `${budgetName} (${tickBudgetMs}) + PROVIDER_TIMEOUT_MS (${s.PROVIDER_TIMEOUT_MS}) + ` +
      `LEASE_SAFETY_MARGIN_MS (${safetyMarginMs}) must be less than LEASE_DURATION_MS (${durationMs}): ` +
      'an attempt started at the end of a tick must be able to finish before the lease deadline');
  check(s.COMMIT_GRACE_MS > s.DB_STATEMENT_TIMEOUT_MS,
    `COMMIT_GRACE_MS (${s.COMMIT_GRACE_MS}) must exceed DB_STATEMENT_TIMEOUT_MS (${s.DB_STATEMENT_TIMEOUT_MS}), ` +
      'the longest a writer transaction may stay open, or refresh could skip a late commit');
  check(s.RETRY_BASE_DELAY_MS <= s.RETRY_MAX_DELAY_MS,
    `RETRY_BASE_DELAY_MS (${s.RETRY_BASE_DELAY_MS}) must not exceed RETRY_MAX_DELAY_MS (${s.RETRY_MAX_DELAY_MS})`);
  check(s.PROVIDER_MAX_IN_FLIGHT <= s.EXECUTOR_CONCURRENCY,
    `PROVIDER_MAX_IN_FLIGHT (${s.PROVIDER_MAX_IN_FLIGHT}) must not exceed EXECUTOR_CONCURRENCY (${s.EXECUTOR_CONCURRENCY}): ` +
      'the executor never has more calls in flight than its concurrency');
  check(s.TRACING === 'off' || s.APPLICATIONINSIGHTS_CONNECTION_STRING === undefined,
    `TRACING (${s.TRACING}) must be off when APPLICATIONINSIGHTS_CONNECTION_STRING is set: spans then go to Azure Monitor`);
  check(s.TRACING_OTLP_URL === undefined || s.TRACING === 'otlp',
    `TRACING_OTLP_URL is set but TRACING is ${s.TRACING}: set TRACING=otlp to export there`);
  check(s.EXECUTOR_SCHEDULE.split(/\s+/).length === 6,
    `EXECUTOR_SCHEDULE ("${s.EXECUTOR_SCHEDULE}") must be a 6-field NCRONTAB expression (with seconds)`);
  let periodMs: number;
  try {
    periodMs = shortestPeriodMs(s.EXECUTOR_SCHEDULE);
  } catch (e) {
    throw new ConfigError(`EXECUTOR_SCHEDULE ("${s.EXECUTOR_SCHEDULE}") is not a valid NCRONTAB expression: ${(e as Error).message}`);
  }
  const invocationLimitMs = s.FUNCTION_TIMEOUT_MS - INVOCATION_MARGIN_MS;
  const closingMs = closingReserveMs({ providerTimeoutMs: s.PROVIDER_TIMEOUT_MS, statementTimeoutMs: s.DB_STATEMENT_TIMEOUT_MS });
  check(closingMs + MIN_TICK_BUDGET_MS <= invocationLimitMs,
    `FUNCTION_TIMEOUT_MS (${s.FUNCTION_TIMEOUT_MS}) leaves no room for a tick: a tick may run ${closingMs} ms past its budget ` +
      `(PROVIDER_TIMEOUT_MS ${s.PROVIDER_TIMEOUT_MS}, DB_STATEMENT_TIMEOUT_MS ${s.DB_STATEMENT_TIMEOUT_MS}: calls in flight, the ` +
      `completion writes, the release), which with a ${MIN_TICK_BUDGET_MS} ms budget must end ${INVOCATION_MARGIN_MS} ms before it`);
  check(s.EXECUTOR_TICK_HANDOFF_MS * 2 < periodMs,
    `EXECUTOR_TICK_HANDOFF_MS (${s.EXECUTOR_TICK_HANDOFF_MS}) must be less than half the EXECUTOR_SCHEDULE period ` +
      `(${periodMs} ms for "${s.EXECUTOR_SCHEDULE}"), or ticks shrink to nothing`);
  // A tick renews only when due, and one may end early (attempt cap, handover): the lease last renewed up to a renew
  // interval before a tick must still be good at the next one, or every tick is a new epoch (orphan recovery, rebuild).
  check(periodMs + s.LEASE_RENEW_INTERVAL_MS + safetyMarginMs < durationMs,
    `the EXECUTOR_SCHEDULE period (${periodMs} ms for "${s.EXECUTOR_SCHEDULE}") + LEASE_RENEW_INTERVAL_MS ` +
      `(${s.LEASE_RENEW_INTERVAL_MS}) + LEASE_SAFETY_MARGIN_MS (${safetyMarginMs}) must be less than LEASE_DURATION_MS ` +
      `(${durationMs}): the leader's next tick must come before its local lease deadline, or every tick starts a new epoch`);
  check(s.EXECUTOR_CONCURRENCY <= PROVIDER_POOL_CONNECTIONS,
    `EXECUTOR_CONCURRENCY (${s.EXECUTOR_CONCURRENCY}) must not exceed the provider connection pool ` +
      `(PROVIDER_POOL_CONNECTIONS, ${PROVIDER_POOL_CONNECTIONS} sockets per origin): calls beyond it would queue inside ` +
      'the pool, unseen by the gate, and could be sent after it closed');
  check(s.DB_POOL_MAX >= LEADER_DB_CONNECTIONS,
    `DB_POOL_MAX (${s.DB_POOL_MAX}) must be at least ${LEADER_DB_CONNECTIONS}: the leader holds that many connections at ` +
      'once (the lease renew, a START or COMPLETE, the maintenance purge); with fewer, one waits for another and the ' +
      'leader steps down on the pool\'s checkout timeout');
  let providerUrl: string | null = null;
  if (s.PROVIDER_URL) {
    try {
      const u = new URL(s.PROVIDER_URL);
      check(u.protocol === 'http:' || u.protocol === 'https:', `PROVIDER_URL must be http(s), got ${u.protocol}`);
    } catch (e) {
      if (e instanceof ConfigError) throw e;
      throw new ConfigError(`PROVIDER_URL: not a valid URL ("${redactUrl(s.PROVIDER_URL)}")`);
    }
    providerUrl = s.PROVIDER_URL;
  }
  return {
    ignoredSettings: s.EXECUTOR_MAX_ATTEMPTS_PER_TICK === undefined ? [] : ['EXECUTOR_MAX_ATTEMPTS_PER_TICK'],
    database: parseDatabase(s),
    lease: {
      name: s.LEASE_NAME,
      holderId: s.HOLDER_ID ?? defaultHolderId(),
      durationMs,
      renewIntervalMs: s.LEASE_RENEW_INTERVAL_MS,
      acquireIntervalMs: s.LEASE_ACQUIRE_INTERVAL_MS,
      safetyMarginMs,
      acquireJitterMs: s.LEASE_ACQUIRE_JITTER_MS,
    },
    schedule: {
      refreshIntervalMs: s.SCHEDULE_REFRESH_INTERVAL_MS,
      pageSize: s.SCHEDULE_REFRESH_PAGE_SIZE,
      commitGraceMs: s.COMMIT_GRACE_MS,
      reconcileIntervalMs: s.SCHEDULE_RECONCILE_INTERVAL_MS,
    },
    executor: {
      schedule: s.EXECUTOR_SCHEDULE,
      tickBudgetMs,
      handoffMs: s.EXECUTOR_TICK_HANDOFF_MS,
      invocationLimitMs,
      closingReserveMs: closingMs,
      dueNotices: s.DUE_NOTICES === 'on',
      concurrency: s.EXECUTOR_CONCURRENCY,
    },
    provider: { url: providerUrl, timeoutMs: s.PROVIDER_TIMEOUT_MS },
    partitions: { count: s.EXECUTOR_PARTITIONS },
    providerGuard: {
      ratePerSec: s.PROVIDER_RATE_LIMIT_PER_SEC, maxInFlight: s.PROVIDER_MAX_IN_FLIGHT || s.EXECUTOR_CONCURRENCY,
      breakerThreshold: s.PROVIDER_BREAKER_THRESHOLD, breakerCooldownMs: s.PROVIDER_BREAKER_COOLDOWN_MS,
      retryAfterMaxMs: s.PROVIDER_RETRY_AFTER_MAX_MS,
    },
    retry: { baseDelayMs: s.RETRY_BASE_DELAY_MS, maxDelayMs: s.RETRY_MAX_DELAY_MS, defaultMaxAttempts: s.DEFAULT_MAX_ATTEMPTS },
    db: { poolMax: s.DB_POOL_MAX, statementTimeoutMs: s.DB_STATEMENT_TIMEOUT_MS, migrationTimeoutMs: s.DB_MIGRATION_TIMEOUT_MS },
    logLevel: s.LOG_LEVEL,
    retention: { days: s.RETENTION_DAYS, olderThanMs: s.RETENTION_DAYS * 86_400_000, batchSize: 1_000, maxBatchesPerTick: 5, intervalMs: 60_000 },
    maintenance: { ...DEFAULT_MAINTENANCE },
    tracing: { mode: s.TRACING, otlpUrl: s.TRACING_OTLP_URL ?? null },
    telemetry: { appInsightsConnectionString: s.APPLICATIONINSIGHTS_CONNECTION_STRING ?? null, aad: parseAppInsightsAuth(s.APPLICATIONINSIGHTS_AUTHENTICATION_STRING) },
  };
}
