// The settings schema: every environment setting of the app, its type, bounds and default, and what it means
// (one zod schema). src/config.ts reads process.env through it and resolves the relational rules between settings.
// May import: `azureDatabase.ts` (the engines DATABASE_ENGINE accepts), `limits.ts` (a leaf: widths the settings share).
import { z } from 'zod';
import { DATABASE_ENGINES } from './azureDatabase.js';
import { LEASE_NAME_MAX_LENGTH, MAX_EXECUTOR_PARTITIONS } from './limits.js';

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
  LEASE_NAME: z.string().trim().min(1).max(LEASE_NAME_MAX_LENGTH).default('submission-manager-executor'),
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
   *  insert (src/intents/partition.ts) and P timer functions are registered. The database records the count (the first
   *  process's P) and it governs: timers beyond it wait; POST /api/ops/partitions changes it (issue 26). */
  EXECUTOR_PARTITIONS: z.coerce.number({ error: `must be an integer from 1 to ${MAX_EXECUTOR_PARTITIONS}` })
    .int(`must be an integer from 1 to ${MAX_EXECUTOR_PARTITIONS}`)
    .min(1, `must be an integer from 1 to ${MAX_EXECUTOR_PARTITIONS}`)
    .max(MAX_EXECUTOR_PARTITIONS, `must be an integer from 1 to ${MAX_EXECUTOR_PARTITIONS}`).default(1),
  /** A partition-count change is reported stuck (an error log, partition_change_stuck_steps_total, the dashboard and
   *  GET /api/ops/partitions) once this many of its changer's steps in a row have failed (default 5, 1..1000); a
   *  step that does not fail resets the count. See docs/operations.md, "A count change that does not progress". */
  PARTITION_CHANGE_STUCK_STEPS: z.coerce.number({ error: 'must be an integer from 1 to 1000' }).int('must be an integer from 1 to 1000')
    .min(1, 'must be an integer from 1 to 1000').max(1000, 'must be an integer from 1 to 1000').default(5),
  /** Every instance upserts its heartbeat row (holder, version, roles, partitions led) this often (default 5 000 ms):
   *  `every-instance` timers count the live rows for their fair share of the partitions; the dashboard lists them. */
  INSTANCE_HEARTBEAT_MS: intMs(5_000, 100),
  /** An instance counts as live while its last beat is at most this old, by database time (at least
   *  2 × INSTANCE_HEARTBEAT_MS + DB_STATEMENT_TIMEOUT_MS: one beat may be missed and the next may be slow; default the
   *  larger of that and 15 000 ms). */
  INSTANCE_LIVE_WINDOW_MS: z.coerce.number().int().min(1).optional(),
  /** Provider calls in flight at once (default 16; at most the provider pool's PROVIDER_POOL_CONNECTIONS, 256). */
  EXECUTOR_CONCURRENCY: intMs(16, 1),
  /** Provider endpoint; empty → the local host's demo provider (Azure: must be set to execute). */
  PROVIDER_URL: z.string().trim().optional(),
  /** Provider protection (src/provider/guard.ts), provider-wide for the whole cluster: every partition's leader
   *  uses its share (src/provider/guardShare.ts); held-back calls never start an attempt. Calls per second at most
   *  (default 0 = unlimited). */
  PROVIDER_RATE_LIMIT_PER_SEC: z.coerce.number().min(0).max(100_000).default(0),
  /** Provider calls in flight at most, cluster-wide (default 0 = EXECUTOR_CONCURRENCY × EXECUTOR_PARTITIONS); must
   *  not exceed that. */
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
  /** Default: max(10, 3 × EXECUTOR_PARTITIONS + 1), so a process leading every partition has its connections (config.ts). */
  DB_POOL_MAX: z.coerce.number().int().min(1).optional(),
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

/** The settings as parsed: every default applied, each value of its type. */
export type Settings = z.infer<typeof settingsSchema>;
