// Spawn the real local host (dist/src/local/main.js) for benchmarks and read the port it prints.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../src/local/main.js');

export interface HostProcess {
  child: ChildProcess;
  base: string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** The local host (or another script that prints `listening on http://…/api`, e.g. a baseline server). */
export async function startHost(env: Record<string, string>, script = MAIN, args: string[] = [], nodeArgs: string[] = []): Promise<HostProcess> {
  const child = spawn(process.execPath, [...nodeArgs, script, ...args], {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stderr!.on('data', (d) => (out += d));
  const base = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`local host did not start:\n${out}`)), 60_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d;
      const m = /listening on (http:\/\/\S+\/api)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.on('exit', (code) => reject(new Error(`local host exited (${code}):\n${out}`)));
  });
  child.stdout!.resume();
  return {
    child,
    base,
    stop: (signal = 'SIGTERM') => new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill(signal);
    }),
  };
}

export const schemaUrl = (url: string, schema: string) =>
  `${url}${url.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
