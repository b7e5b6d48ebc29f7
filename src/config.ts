// The one place that reads process.env: every setting parsed through the one schema (configSchema.ts: its type,
// bounds and default), then resolved here, with the relational rules between settings; bad configuration fails at
// start with a message that names the setting(s).
// May import: `configSchema.ts`, `limits.ts` (the limits its relational checks relate), `azureDatabase.ts`, `version.ts`.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import {
  leaseNameRoomProblem,
  DEFAULT_MAINTENANCE, INVOCATION_MARGIN_MS, MIN_TICK_BUDGET_MS, PROVIDER_POOL_CONNECTIONS, closingReserveMs, shortestPeriodMs,
  type GuardSettings, type MaintenanceSettings,
} from './limits.js';
import { azureDatabaseTarget, type EntraDatabaseTarget } from './azureDatabase.js';
import { settingsSchema, type Settings } from './configSchema.js';
import { appVersion } from './version.js';

/** Connections the leader may hold at once: the lease renew, a batch statement, the maintenance purge. */
export const LEADER_DB_CONNECTIONS = 3;

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
    /** The schedule's shortest period between occurrences. */
    periodMs: number;
    /** One invocation (and a shutdown) ends within this (host.json functionTimeout less a margin); a tick may run
     *  closingReserveMs past its budget. */
    invocationLimitMs: number; closingReserveMs: number;
    /** Wake the leader on due-intent notices where the dialect has them (DUE_NOTICES). */
    dueNotices: boolean };
  provider: { url: string | null; timeoutMs: number };
  /** EXECUTOR_PARTITIONS: intents are assigned partitions 0..count−1; the database records the count.
   *  PARTITION_CHANGE_STUCK_STEPS: failed changer steps in a row after which a change is reported stuck. */
  partitions: { count: number; stuckSteps: number };
  /** The instance heartbeat (INSTANCE_HEARTBEAT_MS, INSTANCE_LIVE_WINDOW_MS) and the app version its row reports. */
  instances: { heartbeatMs: number; liveWindowMs: number; version: string };
  /** Provider protection (see src/provider/guard.ts), cluster-wide: ratePerSec and maxInFlight hold for all the
   *  partitions' leaders together (each process uses its share, src/provider/guardShare.ts); maxInFlight resolved
   *  (never 0; unset: EXECUTOR_CONCURRENCY per partition). */
  providerGuard: GuardSettings;
  retry: { baseDelayMs: number; maxDelayMs: number; defaultMaxAttempts: number };
  db: { poolMax: number; statementTimeoutMs: number; migrationTimeoutMs: number };
  logLevel: Settings['LOG_LEVEL'];
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

export { appVersion, COUNT_CHANGE_MIN_VERSION, isOlderRelease } from './version.js';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Default holder id: `hostname-pid-random`, as the spec says. */
export function defaultHolderId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`.slice(0, 128);
}

function parseDatabase(s: Settings): DatabaseTarget {
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

/** EXECUTOR_PARTITIONS alone, for registering the executor timer functions before the app starts. An invalid value
 *  gives 1 here: the app then refuses to start on its first invocation, naming the setting (loadConfig). */
export function partitionCountSetting(env: Record<string, string | undefined> = process.env): number {
  const raw = env.EXECUTOR_PARTITIONS?.trim();
  const parsed = settingsSchema.shape.EXECUTOR_PARTITIONS.safeParse(raw === '' ? undefined : raw);
  return parsed.success ? parsed.data : 1;
}

/** The executor timer function of each partition: partition 0 keeps `executorTimer` (one partition registers exactly
 *  today's function), partition k is `executorTimer-k`. Each has its own listener lock on Azure and on the local host. */
export function executorTimerFunctions(count: number): { name: string; partition: number }[] {
  return Array.from({ length: count }, (_, k) => ({ name: k === 0 ? 'executorTimer' : `executorTimer-${k}`, partition: k }));
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
  // Cluster-wide (issue 25): P partition executors, each at most EXECUTOR_CONCURRENCY in flight.
  check(s.PROVIDER_MAX_IN_FLIGHT <= s.EXECUTOR_CONCURRENCY * s.EXECUTOR_PARTITIONS, s.EXECUTOR_PARTITIONS === 1
    ? `PROVIDER_MAX_IN_FLIGHT (${s.PROVIDER_MAX_IN_FLIGHT}) must not exceed EXECUTOR_CONCURRENCY (${s.EXECUTOR_CONCURRENCY}): ` +
      'the executor never has more calls in flight than its concurrency'
    : `PROVIDER_MAX_IN_FLIGHT (${s.PROVIDER_MAX_IN_FLIGHT}) must not exceed EXECUTOR_CONCURRENCY (${s.EXECUTOR_CONCURRENCY}) × ` +
      `EXECUTOR_PARTITIONS (${s.EXECUTOR_PARTITIONS}): the partitions' executors never have more calls in flight than that`);
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
  // One process may lead every partition at once (a listener lock per timer function; every-instance's fair share).
  const partitions = s.EXECUTOR_PARTITIONS;
  const leaderConnections = LEADER_DB_CONNECTIONS * partitions;
  const poolMax = s.DB_POOL_MAX ?? Math.max(10, leaderConnections + 1);
  check(poolMax >= leaderConnections,
    `DB_POOL_MAX (${poolMax}) must be at least ${leaderConnections}` +
      (partitions > 1 ? ` (${LEADER_DB_CONNECTIONS} per partition × EXECUTOR_PARTITIONS ${partitions}, as one process may lead them all)` : '') +
      `: a leader holds ${LEADER_DB_CONNECTIONS} connections at ` +
      'once (the lease renew, a START or COMPLETE, the maintenance purge); with fewer, one waits for another and the ' +
      'leader steps down on the pool\'s checkout timeout');
  const leaseNameProblem = leaseNameRoomProblem(s.LEASE_NAME, partitions, `EXECUTOR_PARTITIONS (${partitions})`);
  check(leaseNameProblem === null, leaseNameProblem ?? '');
  const minLiveWindowMs = 2 * s.INSTANCE_HEARTBEAT_MS + s.DB_STATEMENT_TIMEOUT_MS;
  const liveWindowMs = s.INSTANCE_LIVE_WINDOW_MS ?? Math.max(15_000, minLiveWindowMs);
  check(liveWindowMs >= minLiveWindowMs,
    `INSTANCE_LIVE_WINDOW_MS (${liveWindowMs}) must be at least 2 × INSTANCE_HEARTBEAT_MS (${s.INSTANCE_HEARTBEAT_MS}) + ` +
      `DB_STATEMENT_TIMEOUT_MS (${s.DB_STATEMENT_TIMEOUT_MS}): a live instance may miss one beat and its next may take a statement ` +
      'timeout, or it drops out of the live list (and the fair share) while it runs');
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
      periodMs,
      tickBudgetMs,
      handoffMs: s.EXECUTOR_TICK_HANDOFF_MS,
      invocationLimitMs,
      closingReserveMs: closingMs,
      dueNotices: s.DUE_NOTICES === 'on',
      concurrency: s.EXECUTOR_CONCURRENCY,
    },
    provider: { url: providerUrl, timeoutMs: s.PROVIDER_TIMEOUT_MS },
    partitions: { count: s.EXECUTOR_PARTITIONS, stuckSteps: s.PARTITION_CHANGE_STUCK_STEPS },
    instances: { heartbeatMs: s.INSTANCE_HEARTBEAT_MS, liveWindowMs, version: appVersion() },
    providerGuard: {
      ratePerSec: s.PROVIDER_RATE_LIMIT_PER_SEC, maxInFlight: s.PROVIDER_MAX_IN_FLIGHT || s.EXECUTOR_CONCURRENCY * s.EXECUTOR_PARTITIONS,
      breakerThreshold: s.PROVIDER_BREAKER_THRESHOLD, breakerCooldownMs: s.PROVIDER_BREAKER_COOLDOWN_MS,
      retryAfterMaxMs: s.PROVIDER_RETRY_AFTER_MAX_MS,
    },
    retry: { baseDelayMs: s.RETRY_BASE_DELAY_MS, maxDelayMs: s.RETRY_MAX_DELAY_MS, defaultMaxAttempts: s.DEFAULT_MAX_ATTEMPTS },
    db: { poolMax, statementTimeoutMs: s.DB_STATEMENT_TIMEOUT_MS, migrationTimeoutMs: s.DB_MIGRATION_TIMEOUT_MS },
    logLevel: s.LOG_LEVEL,
    retention: { days: s.RETENTION_DAYS, olderThanMs: s.RETENTION_DAYS * 86_400_000, batchSize: 1_000, maxBatchesPerTick: 5, intervalMs: 60_000 },
    maintenance: { ...DEFAULT_MAINTENANCE },
    tracing: { mode: s.TRACING, otlpUrl: s.TRACING_OTLP_URL ?? null },
    telemetry: { appInsightsConnectionString: s.APPLICATIONINSIGHTS_CONNECTION_STRING ?? null, aad: parseAppInsightsAuth(s.APPLICATIONINSIGHTS_AUTHENTICATION_STRING) },
  };
}
