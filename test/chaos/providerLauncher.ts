// The campaign's recording provider (providerProcess.ts) as a child process of the runner: started with the run's
// seed, failure rate and latency, fencing on; its answer time can be changed while it runs (slow phases).
import { spawn, type ChildProcess } from 'node:child_process';
import { PROVIDER_MAIN } from './hostProcess.js';

export interface ProviderProcess {
  url: string;
  child: ChildProcess;
  /** Set the typical answer time from now on; the HTTP status of the provider's answer (null: none). */
  setLatency(ms: number): Promise<number | null>;
  stop(): Promise<void>;
}

export async function startProviderProcess(out: string, seed: number, failureRate: number, latencyMs = 20): Promise<ProviderProcess> {
  const child = spawn(process.execPath, [PROVIDER_MAIN, '--out', out, '--seed', String(seed),
    '--failure-rate', String(failureRate), '--latency-ms', String(latencyMs),
    // The campaign's provider fences by epoch per partition: the checker counts stale requests it accepted (must be 0).
    '--fence', 'on'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<void>((r) => child.on('exit', () => r()));
  const url = await new Promise<string>((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`provider did not start: ${err}`)), 15_000);
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      const m = /listening (\S+)/.exec((buf += d));
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.on('exit', (code) => reject(new Error(`provider exited (${code}): ${err}`)));
  });
  return {
    url, child,
    async setLatency(ms) {
      const r = await fetch(new URL('/control', url), { method: 'POST', body: JSON.stringify({ latencyMs: ms }), signal: AbortSignal.timeout(5_000) }).catch(() => null);
      return r?.status ?? null;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 3_000))]);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
