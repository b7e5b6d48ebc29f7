// The host.json settings the local host honours, read the way the Functions host reads them: the file, then
// app-setting overrides `AzureFunctionsJobHost__<section>__<key>` (names case-insensitive), TimeSpan strings
// ("hh:mm:ss", "d.hh:mm:ss.fff"), and the host's allowed ranges (SingletonOptions in azure-webjobs-sdk:
// a listener lock period of 15–60 s, the blob-lease limits of Azure Storage; a recovery polling interval of
// at least 15 s). Out of range fails at start naming the setting, as the host refuses to start.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../config.js';

export interface SingletonSettings {
  /** Listener lock (blob lease) duration; renewed every half of it. Host default 60 s. */
  listenerLockPeriodMs: number;
  /** How often an instance without the lock tries to take it. Host default 60 s; null = never (disabled). */
  listenerLockRecoveryPollingMs: number | null;
}

export const HOST_SINGLETON_DEFAULTS: SingletonSettings = { listenerLockPeriodMs: 60_000, listenerLockRecoveryPollingMs: 60_000 };
const MIN_LEASE_MS = 15_000;
const MAX_LEASE_MS = 60_000;
/** TimeSpan.MaxValue: the host's "recovery disabled". */
const TIMESPAN_MAX = '10675199.02:48:05.4775807';

/** Parse a .NET TimeSpan string (`[d.]hh:mm[:ss[.fffffff]]`) into milliseconds; null when malformed. */
export function parseTimeSpan(text: string): number | null {
  const m = /^(?:(\d+)\.)?(\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,7}))?)?$/.exec(text.trim());
  if (!m) return null;
  const [, d, h, min, s, frac] = m;
  if (Number(h) > 23 || Number(min) > 59 || Number(s ?? 0) > 59) return null;
  const fracMs = frac ? Number(`0.${frac}`) * 1000 : 0;
  return ((Number(d ?? 0) * 24 + Number(h)) * 60 + Number(min)) * 60_000 + Number(s ?? 0) * 1000 + fracMs;
}

function readHostJson(projectRoot: string): Record<string, unknown> {
  try {
    return JSON.parse(readFileSync(path.join(projectRoot, 'host.json'), 'utf8')) as Record<string, unknown>;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new ConfigError(`host.json: not valid JSON (${(e as Error).message})`);
  }
}

/** A host.json value with its app-setting override, and the name to report it under. */
function lookup(json: Record<string, unknown>, env: Record<string, string | undefined>, section: string, key: string): { value: unknown; name: string } {
  const envName = `AzureFunctionsJobHost__${section}__${key}`;
  const hit = Object.keys(env).find((k) => k.toLowerCase() === envName.toLowerCase() && env[k]?.trim());
  if (hit) return { value: env[hit]!.trim(), name: hit };
  const sec = Object.entries(json).find(([k]) => k.toLowerCase() === section.toLowerCase())?.[1];
  const value = sec && typeof sec === 'object' ? Object.entries(sec).find(([k]) => k.toLowerCase() === key.toLowerCase())?.[1] : undefined;
  return { value, name: `host.json ${section}.${key}` };
}

/** `singleton.listenerLockPeriod` and `singleton.listenerLockRecoveryPollingInterval` (throws ConfigError). */
export function readSingletonSettings(projectRoot: string, env: Record<string, string | undefined>): SingletonSettings {
  const json = readHostJson(projectRoot);
  const span = (key: string, def: number, check: (ms: number) => string | null): number => {
    const { value, name } = lookup(json, env, 'singleton', key);
    if (value === undefined || value === null || value === '') return def;
    const ms = typeof value === 'string' ? parseTimeSpan(value) : null;
    if (ms === null) throw new ConfigError(`${name}: "${String(value)}" is not a TimeSpan (hh:mm:ss)`);
    const problem = check(ms);
    if (problem) throw new ConfigError(`${name}: "${String(value)}" ${problem}`);
    return ms;
  };
  const period = span('listenerLockPeriod', HOST_SINGLETON_DEFAULTS.listenerLockPeriodMs, (ms) =>
    ms < MIN_LEASE_MS || ms > MAX_LEASE_MS ? 'must be between 00:00:15 and 00:01:00 (an Azure Storage blob lease)' : null);
  const recoveryRaw = lookup(json, env, 'singleton', 'listenerLockRecoveryPollingInterval').value;
  const recovery = recoveryRaw === TIMESPAN_MAX ? null
    : span('listenerLockRecoveryPollingInterval', HOST_SINGLETON_DEFAULTS.listenerLockRecoveryPollingMs!, (ms) =>
      ms < MIN_LEASE_MS ? 'must be at least 00:00:15' : null);
  return { listenerLockPeriodMs: period, listenerLockRecoveryPollingMs: recovery };
}
