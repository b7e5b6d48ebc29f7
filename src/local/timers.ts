// Timer functions on their 6-field NCRONTAB schedule (croner, seconds first, UTC as in Azure). By default
// (`singleton`) as the Functions host runs them: each timer function on one instance at a time, the holder of
// its listener lock (listenerLock.ts); `every-instance` runs them on every instance (adversarial test mode).
// `%NAME%` schedules resolve from the environment, falling back to the setting's default in src/configSchema.ts; an
// invalid schedule fails at start naming the setting. One instance's invocations of a timer never overlap: an
// occurrence that falls while the previous one still runs is skipped and the next invocation reports
// isPastDue. runOnStartup is honoured (when the listener starts). Stopping awaits running invocations.
import { randomUUID } from 'node:crypto';
import { Cron } from 'croner';
import type { InvocationContext, Timer } from '@azure/functions';
import { runWithApp } from '../app.js';
import { ConfigError } from '../config.js';
import { settingsSchema } from '../configSchema.js';
import type { RegisteredFunction } from './functionsCore.js';
import type { HostInstance } from './instances.js';
import type { SingletonSettings } from './hostJson.js';
import { ListenerLock, type ListenerLockStore } from './listenerLock.js';
import { invocationLogHandler, type LogSink } from './logSink.js';

type Azf = typeof import('@azure/functions');

export interface TimerFunction {
  fn: RegisteredFunction;
  schedule: string;
  /** The app setting the schedule came from (`%NAME%`), or null when it is a literal. */
  setting: string | null;
  runOnStartup: boolean;
}

const LATE_MS = 1_000;

/** Resolve `%NAME%` from `env`, else the zod default of that setting in settingsSchema. */
export function resolveSetting(name: string, env: Record<string, string | undefined>): string | undefined {
  const v = env[name]?.trim();
  if (v) return v;
  const field = (settingsSchema.shape as Record<string, { safeParse(x: unknown): { success: boolean; data?: unknown } }>)[name];
  const d = field?.safeParse(undefined);
  return d?.success && typeof d.data === 'string' ? d.data : undefined;
}

/** The registered timer functions with their schedules resolved and validated (throws ConfigError). */
export function resolveTimerFunctions(functions: RegisteredFunction[], env: Record<string, string | undefined>): TimerFunction[] {
  return functions.filter((f) => f.trigger.type === 'timerTrigger').map((fn) => {
    const raw = String(fn.trigger.schedule ?? '');
    const ref = /^%([A-Za-z0-9_]+)%$/.exec(raw.trim());
    const setting = ref ? ref[1]! : null;
    const label = setting ?? `schedule of timer function ${fn.name}`;
    const schedule = setting ? resolveSetting(setting, env) : raw.trim();
    if (!schedule) throw new ConfigError(`${label} is not set (timer function ${fn.name} uses "${raw}")`);
    if (schedule.split(/\s+/).length !== 6) {
      throw new ConfigError(`${label} ("${schedule}") must be a 6-field NCRONTAB expression: {second} {minute} {hour} {day} {month} {day-of-week}`);
    }
    let next: Date | null;
    try {
      next = new Cron(schedule, { paused: true, timezone: 'Etc/UTC' }).nextRun();
    } catch (e) {
      throw new ConfigError(`${label} ("${schedule}") is not a valid NCRONTAB expression: ${(e as Error).message}`);
    }
    if (!next) throw new ConfigError(`${label} ("${schedule}") never fires`);
    return { fn, schedule, setting, runOnStartup: fn.trigger.runOnStartup === true };
  });
}

export interface TimerRunner {
  /** No new invocations (running ones continue); listener locks are released (graceful shutdown). */
  stop(): Promise<void>;
  /** Wait for running invocations, at most `timeoutMs`; true if all finished. */
  drain(timeoutMs: number): Promise<boolean>;
}

/** `singleton` (the Functions host's behaviour): each timer function runs on one instance at a time, under a
 *  listener lock. `every-instance`: every instance runs every timer (the fault campaign's adversarial mode). */
export type TimerMode = 'singleton' | 'every-instance';

export interface TimerOptions {
  mode: TimerMode;
  /** Required in singleton mode. */
  locks?: { store: ListenerLockStore; settings: SingletonSettings };
  /** Readable lines (lock transitions). */
  print?: (line: string) => void;
}

/** The host's lock id for a timer function's listener (FunctionFullName + `.Listener`). */
export const listenerLockId = (fn: string) => `Host.Functions.${fn}.Listener`;

export function startTimers(azf: Azf, instances: HostInstance[], timers: TimerFunction[], sink: LogSink,
  o: TimerOptions = { mode: 'every-instance' }): TimerRunner {
  const jobs: Cron[] = [];
  const locks: ListenerLock[] = [];
  const running = new Set<Promise<void>>();
  let stopped = false;
  if (o.mode === 'singleton' && !o.locks) throw new Error('singleton timers need a listener lock store');
  for (const inst of instances) {
    for (const t of timers) {
      let current: Promise<void> | null = null;
      let missed = false;
      let last: Date | null = null;
      const invoke = (scheduledAt: Date, job: Cron | null) => {
        if (stopped) return;
        if (current) {
          missed = true; // never overlap one instance's ticks
          return;
        }
        const now = new Date();
        const isPastDue = missed || now.getTime() - scheduledAt.getTime() > LATE_MS;
        missed = false;
        const timer: Timer = {
          isPastDue,
          schedule: { adjustForDST: false },
          scheduleStatus: {
            last: (last ?? now).toISOString(),
            next: (job?.nextRun() ?? now).toISOString(),
            lastUpdated: now.toISOString(),
          },
        };
        last = now;
        const invocationId = randomUUID();
        const context: InvocationContext = new azf.InvocationContext({
          invocationId,
          functionName: t.fn.name,
          logHandler: invocationLogHandler(sink, invocationId, t.fn.name, inst.holderId),
          options: { trigger: t.fn.trigger as never },
        });
        const p: Promise<void> = Promise.resolve()
          .then(() => runWithApp(inst.app, () => t.fn.handler(timer, context)))
          .then(() => undefined, (e: unknown) => {
            inst.app.logger.error({ event: 'timer_failed', function: t.fn.name, err: e }, 'timer function failed');
          })
          .finally(() => {
            current = null;
            running.delete(p);
          });
        current = p;
        running.add(p);
      };
      const singleton = o.mode === 'singleton';
      const job: Cron = new Cron(t.schedule, { timezone: 'Etc/UTC', paused: singleton }, () => invoke(job.currentRun() ?? new Date(), job));
      jobs.push(job);
      if (!singleton) {
        if (t.runOnStartup) invoke(new Date(), job);
        continue;
      }
      // The listener (this instance's timer) runs only while it holds the function's listener lock.
      const lockId = listenerLockId(t.fn.name);
      const lock = new ListenerLock({
        store: o.locks!.store, lockId, owner: inst.holderId,
        periodMs: o.locks!.settings.listenerLockPeriodMs, recoveryPollingMs: o.locks!.settings.listenerLockRecoveryPollingMs,
        onAcquired: () => {
          if (stopped) return;
          o.print?.(`[${inst.label}] timer ${t.fn.name}: listener lock acquired (this instance runs it)`);
          inst.app.logger.info({ event: 'listener_lock_acquired', function: t.fn.name, lock_id: lockId }, 'timer listener lock acquired');
          job.resume();
          if (t.runOnStartup) invoke(new Date(), job);
        },
        onReleased: (reason) => {
          job.pause();
          o.print?.(`[${inst.label}] timer ${t.fn.name}: listener lock ${reason === 'lost' ? 'lost' : 'released'}`);
          inst.app.logger.warn({ event: 'listener_lock_released', function: t.fn.name, lock_id: lockId, reason }, 'timer listener lock released');
        },
        onOutcome: (op, outcome, sentAtMs) => inst.app.logger.debug({ event: 'listener_lock_op', function: t.fn.name, lock_id: lockId, op,
          outcome, sent_at: new Date(sentAtMs).toISOString() }, 'timer listener lock operation'),
        onError: (op, e) => inst.app.logger.warn({ event: 'listener_lock_error', function: t.fn.name, lock_id: lockId, op,
          error: { message: String((e as Error)?.message ?? e).split('\n')[0] } }, 'listener lock operation failed'),
      });
      locks.push(lock);
      void lock.start();
    }
  }
  return {
    async stop() {
      stopped = true;
      for (const j of jobs) j.stop();
      await Promise.all(locks.map((l) => l.stop()));
    },
    async drain(timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<false>((r) => (timer = setTimeout(() => r(false), timeoutMs)));
      const done = Promise.all([...running]).then(() => true as const);
      const ok = await Promise.race([done, timedOut]);
      clearTimeout(timer);
      return ok;
    },
  };
}
