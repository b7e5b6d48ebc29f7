// loadConfig(env): defaults from the spec, every bad setting rejected with a ConfigError that names the
// setting(s), DATABASE_URL resolution, blanks treated as unset, and no password ever echoed.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { ConfigError, loadConfig, redactUrl, type DatabaseTarget } from '../../src/config.js';
import { FAST_ENV } from '../support/localHostProcess.js';
import { testConfig } from '../support/apps.js';
import { hostEnv } from '../chaos/cluster.js';
import { clusterControlName } from '../../src/limits.js';

type Env = Record<string, string | undefined>;

function configError(env: Env): ConfigError {
  try {
    loadConfig(env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return e as ConfigError;
  }
  throw new Error(`expected a ConfigError for ${JSON.stringify(env)}`);
}

describe('defaults (empty environment)', () => {
  const c = loadConfig({});
  it.each([
    ['lease duration', c.lease.durationMs, 60_000],
    ['renew interval', c.lease.renewIntervalMs, 20_000],
    ['acquire interval', c.lease.acquireIntervalMs, 30_000],
    ['schedule refresh interval', c.schedule.refreshIntervalMs, 1_000],
    ['lease name', c.lease.name, 'submission-manager-executor'],
    ['executor schedule (6-field NCRONTAB)', c.executor.schedule, '*/10 * * * * *'],
    ['safety margin min(5000, duration/4)', c.lease.safetyMarginMs, 5_000],
    ['database', c.database, { kind: 'pglite', dataDir: null }],
    ['provider url', c.provider.url, null],
    ['log level', c.logLevel, 'info'],
  ])('%s', (_name, actual, expected) => {
    expect(actual).toEqual(expected);
  });

  it('holder id is hostname-pid-random', () => {
    expect(c.lease.holderId).toMatch(/^[^-]+(-[^-]+)*-\d+-[0-9a-f]{6}$/);
    expect(c.lease.holderId).toContain(`-${process.pid}-`);
  });

  it('holder id differs between loads (random suffix)', () => {
    expect(loadConfig({}).lease.holderId).not.toBe(loadConfig({}).lease.holderId);
  });

  it('defaults satisfy every relational rule', () => {
    expect(c.lease.renewIntervalMs + c.lease.safetyMarginMs).toBeLessThan(c.lease.durationMs);
    expect(c.executor.tickBudgetMs + c.lease.safetyMarginMs).toBeLessThan(c.lease.durationMs);
    expect(c.schedule.commitGraceMs).toBeGreaterThan(c.db.statementTimeoutMs);
    expect(c.ignoredSettings).toEqual([]);
  });

  it('EXECUTOR_MAX_ATTEMPTS_PER_TICK is accepted (old app settings still start) and named as ignored', () => {
    const x = loadConfig({ EXECUTOR_MAX_ATTEMPTS_PER_TICK: '10', EXECUTOR_CONCURRENCY: '20' });
    expect(x.ignoredSettings).toEqual(['EXECUTOR_MAX_ATTEMPTS_PER_TICK']);
    expect(x.executor.concurrency).toBe(20);
  });

  it('explicit values are used', () => {
    const x = loadConfig({
      LEASE_NAME: 'other', HOLDER_ID: 'node-a', LEASE_DURATION_MS: '30000', LEASE_RENEW_INTERVAL_MS: '10000',
      LEASE_SAFETY_MARGIN_MS: '2000', EXECUTOR_TICK_BUDGET_MS: '5000', PROVIDER_URL: 'https://p.example/x', LOG_LEVEL: 'debug',
    });
    expect(x.lease).toMatchObject({ name: 'other', holderId: 'node-a', durationMs: 30_000, renewIntervalMs: 10_000, safetyMarginMs: 2_000 });
    expect(x.executor.tickBudgetMs).toBe(5_000);
    expect(x.provider.url).toBe('https://p.example/x');
    expect(x.logLevel).toBe('debug');
  });
});

describe('tracing settings', () => {
  it('off by default; console; otlp with or without a URL', () => {
    expect(loadConfig({}).tracing).toEqual({ mode: 'off', otlpUrl: null });
    expect(loadConfig({ TRACING: 'console' }).tracing).toEqual({ mode: 'console', otlpUrl: null });
    expect(loadConfig({ TRACING: 'otlp', TRACING_OTLP_URL: 'http://collector:4318/v1/traces' }).tracing)
      .toEqual({ mode: 'otlp', otlpUrl: 'http://collector:4318/v1/traces' });
  });
});

describe('provider protection settings', () => {
  it('defaults: no rate limit, in-flight cap = EXECUTOR_CONCURRENCY, breaker after 10 for 30 s, Retry-After capped at 60 s', () => {
    expect(loadConfig({}).providerGuard).toEqual({ ratePerSec: 0, maxInFlight: 16, breakerThreshold: 10, breakerCooldownMs: 30_000, retryAfterMaxMs: 60_000 });
  });
  it('explicit values; a breaker threshold of 0 turns the breaker (and its cool-down rule) off', () => {
    expect(loadConfig({ PROVIDER_RATE_LIMIT_PER_SEC: '2.5', PROVIDER_MAX_IN_FLIGHT: '4', PROVIDER_BREAKER_THRESHOLD: '0',
      PROVIDER_BREAKER_COOLDOWN_MS: '900000', PROVIDER_RETRY_AFTER_MAX_MS: '5000' }).providerGuard)
      .toEqual({ ratePerSec: 2.5, maxInFlight: 4, breakerThreshold: 0, breakerCooldownMs: 900_000, retryAfterMaxMs: 5_000 });
  });
});

describe('EXECUTOR_PARTITIONS (issue 25)', () => {
  it('default 1: one partition, as before partitions existed', () => {
    expect(loadConfig({}).partitions).toEqual({ count: 1, stuckSteps: 5 });
  });
  it.each([['1', 1], ['4', 4], ['64', 64], [' 8 ', 8]])('%j → %i', (v, n) => {
    expect(loadConfig({ EXECUTOR_PARTITIONS: v }).partitions.count).toBe(n);
  });
  it('PARTITION_CHANGE_STUCK_STEPS: default 5, 1..1000, anything else refused naming it', () => {
    expect(loadConfig({ PARTITION_CHANGE_STUCK_STEPS: '12' }).partitions.stuckSteps).toBe(12);
    for (const v of ['0', '1001', '2.5', 'x']) expect(configError({ PARTITION_CHANGE_STUCK_STEPS: v }).message).toContain('PARTITION_CHANGE_STUCK_STEPS');
  });
  it.each(['0', '65', '-1', '2.5', 'four', '1e3'])('%j is refused, naming the setting and the range', (v) => {
    const err = configError({ EXECUTOR_PARTITIONS: v });
    expect(err.message).toContain('EXECUTOR_PARTITIONS');
    expect(err.message).toContain('1 to 64');
  });
  it('the pool default grows with the partitions one process may lead (3 connections each)', () => {
    expect(loadConfig({}).db.poolMax).toBe(10);
    expect(loadConfig({ EXECUTOR_PARTITIONS: '3' }).db.poolMax).toBe(10);
    expect(loadConfig({ EXECUTOR_PARTITIONS: '4' }).db.poolMax).toBe(13);
    expect(loadConfig({ EXECUTOR_PARTITIONS: '4', DB_POOL_MAX: '12' }).db.poolMax).toBe(12);
  });
  it('an explicit pool too small for every partition is refused, naming both settings', () => {
    const err = configError({ EXECUTOR_PARTITIONS: '4', DB_POOL_MAX: '11' });
    expect(err.message).toContain('DB_POOL_MAX (11)');
    expect(err.message).toContain('EXECUTOR_PARTITIONS 4');
  });
  it('LEASE_NAME may not contain the partition separator # with more than one partition, naming both settings', () => {
    expect(loadConfig({ LEASE_NAME: 'a#b' }).lease.name).toBe('a#b');
    const err = configError({ LEASE_NAME: 'a#b', EXECUTOR_PARTITIONS: '2' });
    expect(err.message).toContain('LEASE_NAME');
    expect(err.message).toContain('EXECUTOR_PARTITIONS (2)');
  });
  it('LEASE_NAME leaves room for the cluster pause key LEASE_NAME#* (62 characters at most): no two clusters share one pause', () => {
    expect(loadConfig({ LEASE_NAME: 'x'.repeat(62) }).lease.name).toHaveLength(62);
    for (const name of ['x'.repeat(63), 'x'.repeat(62) + 'a']) {
      const err = configError({ LEASE_NAME: name });
      expect(err.message).toContain('LEASE_NAME');
      expect(err.message).toContain('#*');
    }
    // Two names of 62 characters differing in the last one keep distinct keys (nothing is cut).
    expect(clusterControlName('x'.repeat(61) + 'a')).not.toBe(clusterControlName('x'.repeat(61) + 'b'));
    expect(() => clusterControlName('x'.repeat(63))).toThrow(/LEASE_NAME/);
  });
  it('LEASE_NAME leaves room for the partition suffix (`#63` with 64 partitions), naming both settings', () => {
    expect(loadConfig({ LEASE_NAME: 'x'.repeat(61), EXECUTOR_PARTITIONS: '64', DB_POOL_MAX: '192' }).lease.name).toHaveLength(61);
    const err = configError({ LEASE_NAME: 'x'.repeat(62), EXECUTOR_PARTITIONS: '64', DB_POOL_MAX: '192' });
    expect(err.message).toContain('LEASE_NAME');
    expect(err.message).toContain('EXECUTOR_PARTITIONS (64)');
  });
});

describe('instance heartbeat settings (issue 25)', () => {
  it('defaults: a beat every 5 s, live for 15 s (or 2 beats + a statement timeout when that is longer); the package version', () => {
    const version = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;
    expect(loadConfig({}).instances).toEqual({ heartbeatMs: 5_000, liveWindowMs: 15_000, version });
    expect(loadConfig({ INSTANCE_HEARTBEAT_MS: '7000' }).instances.liveWindowMs).toBe(17_000);
    expect(loadConfig({ INSTANCE_HEARTBEAT_MS: '200', INSTANCE_LIVE_WINDOW_MS: '3400' }).instances).toMatchObject({ heartbeatMs: 200, liveWindowMs: 3_400 });
  });
  it('a window shorter than two beats and a statement timeout is refused, naming the settings', () => {
    const err = configError({ INSTANCE_HEARTBEAT_MS: '5000', INSTANCE_LIVE_WINDOW_MS: '12999' });
    for (const n of ['INSTANCE_LIVE_WINDOW_MS (12999)', 'INSTANCE_HEARTBEAT_MS (5000)', 'DB_STATEMENT_TIMEOUT_MS (3000)']) expect(err.message).toContain(n);
    expect(configError({ INSTANCE_HEARTBEAT_MS: '99' }).message).toContain('INSTANCE_HEARTBEAT_MS');
  });
});

describe('bad settings are rejected with a ConfigError naming the setting(s)', () => {
  const table: Array<[string, Env, string[]]> = [
    ['non-numeric duration', { LEASE_DURATION_MS: 'sixty' }, ['LEASE_DURATION_MS']],
    ['numeric with suffix', { LEASE_RENEW_INTERVAL_MS: '20s' }, ['LEASE_RENEW_INTERVAL_MS']],
    ['fractional', { LEASE_ACQUIRE_INTERVAL_MS: '1.5' }, ['LEASE_ACQUIRE_INTERVAL_MS']],
    ['negative', { LEASE_DURATION_MS: '-60000' }, ['LEASE_DURATION_MS']],
    ['negative margin', { LEASE_SAFETY_MARGIN_MS: '-1' }, ['LEASE_SAFETY_MARGIN_MS']],
    ['zero renew (min > 0)', { LEASE_RENEW_INTERVAL_MS: '0' }, ['LEASE_RENEW_INTERVAL_MS']],
    ['zero concurrency (min > 0)', { EXECUTOR_CONCURRENCY: '0' }, ['EXECUTOR_CONCURRENCY']],
    ['zero provider timeout', { PROVIDER_TIMEOUT_MS: '0' }, ['PROVIDER_TIMEOUT_MS']],
    ['max attempts above 50', { DEFAULT_MAX_ATTEMPTS: '51' }, ['DEFAULT_MAX_ATTEMPTS']],
    ['renew == duration', { LEASE_DURATION_MS: '20000', LEASE_RENEW_INTERVAL_MS: '20000' }, ['LEASE_RENEW_INTERVAL_MS', 'LEASE_DURATION_MS']],
    ['renew > duration', { LEASE_RENEW_INTERVAL_MS: '70000' }, ['LEASE_RENEW_INTERVAL_MS', 'LEASE_DURATION_MS']],
    ['margin >= duration', { LEASE_DURATION_MS: '10000', LEASE_RENEW_INTERVAL_MS: '100', EXECUTOR_TICK_BUDGET_MS: '100', LEASE_SAFETY_MARGIN_MS: '10000' },
      ['LEASE_SAFETY_MARGIN_MS', 'LEASE_DURATION_MS']],
    ['renew + default margin >= duration', { LEASE_DURATION_MS: '10000', LEASE_RENEW_INTERVAL_MS: '8000', EXECUTOR_TICK_BUDGET_MS: '1000' },
      ['LEASE_RENEW_INTERVAL_MS', 'LEASE_SAFETY_MARGIN_MS', 'LEASE_DURATION_MS']],
    ['renew + explicit margin >= duration', { LEASE_RENEW_INTERVAL_MS: '40000', LEASE_SAFETY_MARGIN_MS: '20000' },
      ['LEASE_RENEW_INTERVAL_MS', 'LEASE_SAFETY_MARGIN_MS', 'LEASE_DURATION_MS']],
    ['tick budget + margin >= duration', { EXECUTOR_TICK_BUDGET_MS: '55000' }, ['EXECUTOR_TICK_BUDGET_MS', 'LEASE_SAFETY_MARGIN_MS', 'LEASE_DURATION_MS']],
    ['COMMIT_GRACE_MS == DB_STATEMENT_TIMEOUT_MS', { COMMIT_GRACE_MS: '3000' }, ['COMMIT_GRACE_MS', 'DB_STATEMENT_TIMEOUT_MS']],
    ['COMMIT_GRACE_MS < DB_STATEMENT_TIMEOUT_MS', { COMMIT_GRACE_MS: '1000', DB_STATEMENT_TIMEOUT_MS: '2000' }, ['COMMIT_GRACE_MS', 'DB_STATEMENT_TIMEOUT_MS']],
    ['retry base > max', { RETRY_BASE_DELAY_MS: '5000', RETRY_MAX_DELAY_MS: '1000' }, ['RETRY_BASE_DELAY_MS', 'RETRY_MAX_DELAY_MS']],
    ['timer period longer than the lease allows (every 5 min, 60 s lease)', { EXECUTOR_SCHEDULE: '0 */5 * * * *' },
      ['EXECUTOR_SCHEDULE', 'LEASE_RENEW_INTERVAL_MS', 'LEASE_SAFETY_MARGIN_MS', 'LEASE_DURATION_MS']],
    ['period + renew + margin == duration (30 + 25 + 5 s)', { EXECUTOR_SCHEDULE: '*/30 * * * * *', LEASE_RENEW_INTERVAL_MS: '25000' },
      ['EXECUTOR_SCHEDULE', 'LEASE_RENEW_INTERVAL_MS', 'LEASE_SAFETY_MARGIN_MS', 'LEASE_DURATION_MS']],
    ['short lease with the default 10 s timer', { LEASE_DURATION_MS: '3000', LEASE_RENEW_INTERVAL_MS: '1000', EXECUTOR_TICK_BUDGET_MS: '500', PROVIDER_TIMEOUT_MS: '1000' },
      ['EXECUTOR_SCHEDULE', 'LEASE_DURATION_MS']],
    ['concurrency above the provider pool', { EXECUTOR_CONCURRENCY: '257' }, ['EXECUTOR_CONCURRENCY', 'PROVIDER_POOL_CONNECTIONS']],
    ['concurrency far above the provider pool', { EXECUTOR_CONCURRENCY: '100000' },
      ['EXECUTOR_CONCURRENCY', 'PROVIDER_POOL_CONNECTIONS']],
    ['a database pool smaller than the leader needs at once', { DB_POOL_MAX: '2' }, ['DB_POOL_MAX']],
    ['5-field cron', { EXECUTOR_SCHEDULE: '*/10 * * * *' }, ['EXECUTOR_SCHEDULE']],
    ['7-field cron', { EXECUTOR_SCHEDULE: '0 */10 * * * * *' }, ['EXECUTOR_SCHEDULE']],
    ['bad LOG_LEVEL', { LOG_LEVEL: 'verbose' }, ['LOG_LEVEL']],
    ['PROVIDER_URL not a URL', { PROVIDER_URL: 'not a url' }, ['PROVIDER_URL']],
    ['ftp PROVIDER_URL', { PROVIDER_URL: 'ftp://files.example.com/in' }, ['PROVIDER_URL']],
    ['unknown DATABASE_URL scheme', { DATABASE_URL: 'oracle://u:p@db.example.com/x' }, ['DATABASE_URL']],
    ['DATABASE_URL without a scheme', { DATABASE_URL: 'db.example.com' }, ['DATABASE_URL']],
    ['DATABASE_URL with Authentication=Active Directory Default',
      { DATABASE_URL: 'Server=tcp:x.database.windows.net,1433;Database=db;Authentication=Active Directory Default' }, ['DATABASE_URL', 'SQL_SERVER']],
    ['mssql URL with Authentication=Active Directory Default',
      { DATABASE_URL: 'mssql://x.database.windows.net/db?Authentication=Active Directory Default' }, ['DATABASE_URL']],
    ['SQL_SERVER without SQL_DATABASE', { SQL_SERVER: 'x.database.windows.net' }, ['SQL_SERVER', 'SQL_DATABASE']],
    ['SQL_DATABASE without SQL_SERVER', { SQL_DATABASE: 'db' }, ['SQL_SERVER', 'SQL_DATABASE']],
    ['DATABASE_URL together with SQL_SERVER', { DATABASE_URL: 'postgres://localhost/x', SQL_SERVER: 'x.database.windows.net', SQL_DATABASE: 'db' },
      ['DATABASE_URL', 'SQL_SERVER']],
    ['LEASE_NAME too long', { LEASE_NAME: 'x'.repeat(65) }, ['LEASE_NAME']],
    ['negative provider rate', { PROVIDER_RATE_LIMIT_PER_SEC: '-1' }, ['PROVIDER_RATE_LIMIT_PER_SEC']],
    ['provider rate not a number', { PROVIDER_RATE_LIMIT_PER_SEC: 'fast' }, ['PROVIDER_RATE_LIMIT_PER_SEC']],
    ['fractional breaker threshold', { PROVIDER_BREAKER_THRESHOLD: '2.5' }, ['PROVIDER_BREAKER_THRESHOLD']],
    ['zero breaker cool-down', { PROVIDER_BREAKER_COOLDOWN_MS: '0' }, ['PROVIDER_BREAKER_COOLDOWN_MS']],
    ['provider in-flight cap > concurrency', { PROVIDER_MAX_IN_FLIGHT: '17' }, ['PROVIDER_MAX_IN_FLIGHT', 'EXECUTOR_CONCURRENCY']],
    ['TRACING with Application Insights', { TRACING: 'console', APPLICATIONINSIGHTS_CONNECTION_STRING: 'InstrumentationKey=x' }, ['TRACING', 'APPLICATIONINSIGHTS_CONNECTION_STRING']],
    ['TRACING_OTLP_URL without TRACING=otlp', { TRACING_OTLP_URL: 'http://collector:4318/v1/traces' }, ['TRACING_OTLP_URL', 'TRACING']],
    ['unknown TRACING', { TRACING: 'jaeger' }, ['TRACING']],
    ['function timeout too short for a tick\'s close', { FUNCTION_TIMEOUT_MS: '30000' },
      ['FUNCTION_TIMEOUT_MS', 'PROVIDER_TIMEOUT_MS', 'DB_STATEMENT_TIMEOUT_MS']],
    ['TRACING_OTLP_URL not http(s)', { TRACING: 'otlp', TRACING_OTLP_URL: 'grpc://collector:4317' }, ['TRACING_OTLP_URL']],
  ];

  it.each(table)('%s', (_name, env, names) => {
    const err = configError(env);
    expect(err.name).toBe('ConfigError');
    for (const n of names) expect(err.message).toContain(n);
  });

  it('has at least 15 cases', () => {
    expect(table.length).toBeGreaterThanOrEqual(15);
  });
});

describe('DATABASE_URL resolution', () => {
  it.each<[string, Env, DatabaseTarget]>([
    ['unset → pglite in memory', {}, { kind: 'pglite', dataDir: null }],
    ['pglite: → memory', { DATABASE_URL: 'pglite:' }, { kind: 'pglite', dataDir: null }],
    ['pglite:// → memory', { DATABASE_URL: 'pglite://' }, { kind: 'pglite', dataDir: null }],
    ['pglite:memory → memory', { DATABASE_URL: 'pglite:memory' }, { kind: 'pglite', dataDir: null }],
    ['pglite:<dir> → dataDir', { DATABASE_URL: 'pglite:./.data/x' }, { kind: 'pglite', dataDir: './.data/x' }],
    ['pglite://<dir> → dataDir', { DATABASE_URL: 'pglite:///var/lib/sm' }, { kind: 'pglite', dataDir: '/var/lib/sm' }],
    ['postgres://', { DATABASE_URL: 'postgres://u:p@127.0.0.1:5432/sm' }, { kind: 'postgres', url: 'postgres://u:p@127.0.0.1:5432/sm' }],
    ['postgresql://', { DATABASE_URL: 'postgresql://u@h/sm?sslmode=require' }, { kind: 'postgres', url: 'postgresql://u@h/sm?sslmode=require' }],
    ['mssql://', { DATABASE_URL: 'mssql://sa:Pw1@localhost:1433/sm' }, { kind: 'mssql', url: 'mssql://sa:Pw1@localhost:1433/sm' }],
    ['mysql://', { DATABASE_URL: 'mysql://root@127.0.0.1:3306/test' }, { kind: 'mysql', url: 'mysql://root@127.0.0.1:3306/test' }],
    ['mariadb://', { DATABASE_URL: 'mariadb://u:p@db:3306/sm' }, { kind: 'mysql', url: 'mariadb://u:p@db:3306/sm' }],
    ['surrounding whitespace is trimmed', { DATABASE_URL: '  postgres://h/sm  ' }, { kind: 'postgres', url: 'postgres://h/sm' }],
    ['SQL_SERVER + SQL_DATABASE → Entra (system identity)', { SQL_SERVER: 's.database.windows.net', SQL_DATABASE: 'sm' },
      { kind: 'mssqlEntra', server: 's.database.windows.net', database: 'sm', clientId: null }],
    ['SQL_SERVER + SQL_DATABASE + AZURE_CLIENT_ID → Entra (user-assigned identity)',
      { SQL_SERVER: 's.database.windows.net', SQL_DATABASE: 'sm', AZURE_CLIENT_ID: '00000000-0000-0000-0000-000000000001' },
      { kind: 'mssqlEntra', server: 's.database.windows.net', database: 'sm', clientId: '00000000-0000-0000-0000-000000000001' }],
  ])('%s', (_name, env, expected) => {
    expect(loadConfig(env).database).toEqual(expected);
  });
});

describe('blank values are unset', () => {
  const blanks = ['', '   ', '\t'];
  it.each(blanks.map((b) => [JSON.stringify(b), b] as const))('%s everywhere → the defaults', (_n, blank) => {
    const env: Env = {};
    for (const k of [
      'DATABASE_URL', 'SQL_SERVER', 'SQL_DATABASE', 'AZURE_CLIENT_ID', 'LEASE_NAME', 'HOLDER_ID', 'LEASE_DURATION_MS',
      'LEASE_RENEW_INTERVAL_MS', 'LEASE_ACQUIRE_INTERVAL_MS', 'LEASE_SAFETY_MARGIN_MS', 'LEASE_ACQUIRE_JITTER_MS',
      'SCHEDULE_REFRESH_INTERVAL_MS', 'COMMIT_GRACE_MS', 'EXECUTOR_SCHEDULE', 'EXECUTOR_TICK_BUDGET_MS',
      'EXECUTOR_MAX_ATTEMPTS_PER_TICK', 'EXECUTOR_CONCURRENCY', 'PROVIDER_URL', 'PROVIDER_TIMEOUT_MS', 'LOG_LEVEL',
    ]) env[k] = blank;
    const c = loadConfig(env);
    const d = loadConfig({});
    expect({ ...c, lease: { ...c.lease, holderId: 'x' } }).toEqual({ ...d, lease: { ...d.lease, holderId: 'x' } });
    expect(c.lease.holderId).toMatch(/^[^-]+(-[^-]+)*-\d+-[0-9a-f]{6}$/);
  });

  it('a blank DATABASE_URL beside SQL_SERVER is not "both set"', () => {
    expect(loadConfig({ DATABASE_URL: '', SQL_SERVER: 's', SQL_DATABASE: 'd' }).database.kind).toBe('mssqlEntra');
  });
});

describe('secrets', () => {
  it.each([
    ['postgres://user:s3cretPw@h:5432/db', 's3cretPw'],
    ['mssql://sa:Pa55word!@h:1433/db', 'Pa55word!'],
    ['mysql://user:p@ssword@h/db', 'ssword'],
    ['mysql://user:pa/ss@h/db', 'pa/ss'],
    ['mysql://:onlyPw@h/db', 'onlyPw'],
    ['https://u:tok3n@api.example.com/x?y=1', 'tok3n'],
  ])('redactUrl(%s) hides the password', (url, pw) => {
    const r = redactUrl(url);
    expect(r).not.toContain(pw);
    expect(r).toContain('***');
  });

  it.each([
    ['postgres://h/db'],
    ['pglite:./.data/x'],
    ['https://api.example.com/x?y=1'],
  ])('redactUrl(%s) leaves a URL without credentials alone', (url) => {
    expect(redactUrl(url)).toBe(url);
  });

  it.each<[string, Env]>([
    ['unknown scheme', { DATABASE_URL: 'oracle://admin:Hunter2Secret@db.example.com/x' }],
    ['unknown scheme, raw @ in password', { DATABASE_URL: 'oracle://admin:Hunter2@Secret@db.example.com/x' }],
    ['unknown scheme, raw / in password', { DATABASE_URL: 'oracle://admin:Hunter2/Secret@db.example.com/x' }],
    ['no // authority', { DATABASE_URL: 'mysql:admin:Hunter2Secret@db.example.com' }],
    ['.NET connection string with a password', { DATABASE_URL: 'Server=tcp:h,1433;User ID=sa;Password=Hunter2Secret;' }],
    ['.NET connection string with Authentication=', { DATABASE_URL: 'Server=h;Authentication=Active Directory Default;Password=Hunter2Secret' }],
    ['mssql URL with Authentication=', { DATABASE_URL: 'mssql://sa:Hunter2Secret@h/db?Authentication=Active Directory Password' }],
    ['beside SQL_SERVER', { DATABASE_URL: 'postgres://u:Hunter2Secret@h/db', SQL_SERVER: 's', SQL_DATABASE: 'd' }],
    ['beside another bad setting', { DATABASE_URL: 'postgres://u:Hunter2Secret@h/db', LEASE_DURATION_MS: 'x' }],
  ])('DATABASE_URL password never appears in the error: %s', (_name, env) => {
    const err = configError(env);
    expect(err.message).not.toContain('Hunter2');
    expect(err.message).not.toContain('Secret');
    expect(err.stack ?? '').not.toContain('Hunter2');
  });
});

describe('the settings we ship and test with satisfy every relation (issue 20 item 8)', () => {
  const json = (p: string) => JSON.parse(readFileSync(new URL(`../../${p}`, import.meta.url), 'utf8')) as { Values: Env };
  // Literal app settings of the Azure deployment (`{ name: 'X', value: 'Y' }` in infra/app/api.bicep).
  const bicep = Object.fromEntries([...readFileSync(new URL('../../infra/app/api.bicep', import.meta.url), 'utf8')
    .matchAll(/\{ name: '([A-Z_]+)', value: '([^']*)' \}/g)].map((m) => [m[1]!, m[2]!]));
  it.each<[string, Env]>([
    ['defaults', {}],
    ['local.settings.sample.json', json('local.settings.sample.json').Values],
    ['infra/app/api.bicep', bicep],
    ['the local host in tests (FAST_ENV)', FAST_ENV],
    ['the chaos campaign (test/chaos/run.ts timings)', hostEnv({ leaseMs: 2_000, renewMs: 500, refreshMs: 200, tickMs: 1_000 })],
    ['the lease-lock campaign (test/chaos/leaseLock.ts)', { EXECUTOR_SCHEDULE: '*/1 * * * * *', LEASE_DURATION_MS: '10000', LEASE_RENEW_INTERVAL_MS: '2000',
      LEASE_SAFETY_MARGIN_MS: '1000', EXECUTOR_TICK_BUDGET_MS: '3000', PROVIDER_TIMEOUT_MS: '2000', COMMIT_GRACE_MS: '3000', DB_STATEMENT_TIMEOUT_MS: '2000' }],
    ['concurrency at the provider pool size', { EXECUTOR_CONCURRENCY: '256' }],
    ['period + renew + margin just under the lease (30 + 24.999 + 5 s)', { EXECUTOR_SCHEDULE: '*/30 * * * * *', LEASE_RENEW_INTERVAL_MS: '24999' }],
  ])('%s', (_name, env) => {
    expect(() => loadConfig(env)).not.toThrow();
  });
  it('test/support/apps.ts testConfig', () => {
    expect(() => testConfig('http://127.0.0.1:1/')).not.toThrow();
  });
  it('the bicep settings were found', () => {
    expect(Object.keys(bicep)).toEqual(expect.arrayContaining(['LEASE_DURATION_MS', 'EXECUTOR_SCHEDULE', 'EXECUTOR_CONCURRENCY']));
  });
});
