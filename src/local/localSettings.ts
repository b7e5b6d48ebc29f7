// Settings that only the local host reads (the app's own settings live in src/config.ts). Validated with
// zod at start; a bad value fails with one line naming the setting (exit code 2, see main.ts).
import { z } from 'zod';
import { ConfigError } from '../config.js';

/** Embedded, persistent PGlite under the working directory: `npm start` needs no database. */
export const LOCAL_DEFAULT_DATABASE_URL = 'pglite:.data/pglite';

const localSchema = z.object({
  /** HTTP port on 127.0.0.1 (default 7071, like `func start`); 0 → an ephemeral port (printed). */
  PORT: z.coerce.number().int().min(0).max(65_535).default(7071),
  /** In-process instances sharing one database, each with its own holder id (default 3). */
  INSTANCES: z.coerce.number().int().min(1).max(64).default(3),
  /** When set, routes with authLevel function/admin need `x-functions-key: <key>` or `?code=<key>`. */
  FUNCTION_KEY: z.string().trim().min(1).optional(),
  /** When set, routes with authLevel admin (the ops routes) need this key, as Azure needs the master key;
   *  it is also accepted on function routes. Unset: admin routes take FUNCTION_KEY (or nothing). */
  ADMIN_KEY: z.string().trim().min(1).optional(),
  /** Demo provider (mounted when PROVIDER_URL is unset): response latency (default 50 ms). */
  DEMO_PROVIDER_LATENCY_MS: z.coerce.number().int().min(0).max(600_000).default(50),
  /** Demo provider: share of calls answered 503 + Retry-After: 1 (default 0.2). */
  DEMO_PROVIDER_FAILURE_RATE: z.coerce.number().min(0).max(1).default(0.2),
  /** Demo provider: keep the highest X-Lease-Epoch per partition and refuse a lower one with 409 (default off). */
  DEMO_PROVIDER_FENCE: z.enum(['on', 'off']).default('off'),
  /** Demo provider: print one line per call on stdout (default true). */
  DEMO_PROVIDER_VERBOSE: z.enum(['true', 'false', '1', '0']).default('true').transform((v) => v === 'true' || v === '1'),
  /** Where the pino JSON logs go: a file (default `.data/host.log`), or `-` / `stderr` for stderr. */
  LOG_FILE: z.string().trim().min(1).default('.data/host.log'),
  /** `singleton` (default, as the Functions host): each timer function runs on one instance at a time, the
   *  holder of its listener lock. `every-instance`: every instance runs every timer (adversarial test mode).
   *  `off`: HTTP functions only, as Flex's HTTP instance group (another process runs the timers; benchmarks). */
  TIMER_MODE: z.enum(['singleton', 'every-instance', 'off']).default('singleton'),
  /** Storage for the listener locks (blob leases), as the Functions host uses it: set → shared by every process
   *  using it (locally Azurite: `UseDevelopmentStorage=true` after `npm run azurite`); unset → in-process locks. */
  AzureWebJobsStorage: z.string().trim().min(1).optional(),
  /** Host id (lock blobs live under locks/<hostId>/); processes of one cluster share it (default submission-manager). */
  AzureFunctionsWebHost__hostid: z.string().trim().regex(/^[a-z0-9][a-z0-9-]{0,31}$/, 'lower-case letters, digits and dashes, at most 32').default('submission-manager'),
});

/** Every setting name the local host reads (test launchers clear them so an inherited value never leaks in). */
export const LOCAL_SETTING_NAMES: readonly string[] = Object.keys(localSchema.shape);

export interface LocalSettings {
  port: number;
  instances: number;
  functionKey: string | null;
  adminKey: string | null;
  demoProvider: { latencyMs: number; failureRate: number; verbose: boolean; fence: boolean };
  /** null → stderr. */
  logFile: string | null;
  timerMode: 'singleton' | 'every-instance' | 'off';
  /** AzureWebJobsStorage (a secret: never printed as is). */
  storage: string | null;
  hostId: string;
}

/** Parse the local host's settings; throws ConfigError naming the first bad setting. */
export function loadLocalSettings(env: Record<string, string | undefined>): LocalSettings {
  const raw = Object.fromEntries(
    Object.keys(localSchema.shape).map((k) => [k, env[k]?.trim() === '' ? undefined : env[k]]),
  );
  const parsed = localSchema.safeParse(raw);
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    const name = String(i.path[0] ?? 'setting');
    const got = ['FUNCTION_KEY', 'ADMIN_KEY', 'AzureWebJobsStorage'].includes(name) ? '' : ` (got "${String(raw[name] ?? '')}")`; // never echo a secret
    throw new ConfigError(`${name}: ${i.message}${got}`);
  }
  const s = parsed.data;
  return {
    port: s.PORT,
    instances: s.INSTANCES,
    functionKey: s.FUNCTION_KEY ?? null,
    adminKey: s.ADMIN_KEY ?? null,
    demoProvider: { latencyMs: s.DEMO_PROVIDER_LATENCY_MS, failureRate: s.DEMO_PROVIDER_FAILURE_RATE, verbose: s.DEMO_PROVIDER_VERBOSE,
      fence: s.DEMO_PROVIDER_FENCE === 'on' },
    logFile: s.LOG_FILE === '-' || s.LOG_FILE.toLowerCase() === 'stderr' ? null : s.LOG_FILE,
    timerMode: s.TIMER_MODE,
    storage: s.AzureWebJobsStorage ?? null,
    hostId: s.AzureFunctionsWebHost__hostid,
  };
}

/** The environment the app's config is loaded from: DATABASE_URL defaults to the embedded PGlite
 *  (unless SQL_SERVER selects Azure SQL); everything else is the caller's environment. */
export function withLocalDefaults(env: Record<string, string | undefined>): Record<string, string | undefined> {
  const blank = (v: string | undefined) => v === undefined || v.trim() === '';
  if (blank(env.DATABASE_URL) && blank(env.SQL_SERVER)) return { ...env, DATABASE_URL: LOCAL_DEFAULT_DATABASE_URL };
  return env;
}
