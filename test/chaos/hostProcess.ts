// A local-host process (`node dist/src/local/main.js`, INSTANCES=1) for the campaign. Like
// test/support/localHostProcess.ts, but it copies the host's readable stdout/stderr into the run directory
// as evidence.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import path from 'node:path';
import { settingsSchema } from '../../src/configSchema.js';
import { LOCAL_SETTING_NAMES } from '../../src/local/localSettings.js';
import { projectRoot } from '../support/projectRoot.js';

export const ROOT = projectRoot(import.meta.url);
const MAIN = path.join(ROOT, 'dist/src/local/main.js');
export const PROVIDER_MAIN = path.join(ROOT, 'dist/test/chaos/providerProcess.js');

export interface ChaosHost {
  child: ChildProcess;
  api: string;
  holderIds: string[];
  exited: Promise<void>;
  /** Wall ms when it listened, and when it exited (null while running). */
  startedAt: number;
  exitedAt: number | null;
  /** The previous release's build it runs (mixed-version campaign); undefined: this checkout. */
  release?: string;
  signal(sig: NodeJS.Signals): void;
  alive(): boolean;
}

/** Spawn a host (of the release built at `root`: this checkout by default, the previous release in the mixed-version
 *  campaign); resolves once it prints where it listens and its holder ids. */
export async function startChaosHost(env: Record<string, string>, outFile: string, timeoutMs = 60_000, root = ROOT): Promise<ChaosHost> {
  const clean: Record<string, string | undefined> = { ...process.env };
  for (const k of [...Object.keys(settingsSchema.shape), ...LOCAL_SETTING_NAMES]) delete clean[k];
  const main = root === ROOT ? MAIN : path.join(root, 'dist/src/local/main.js');
  const child = spawn(process.execPath, [main], { cwd: root, env: { ...clean, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = createWriteStream(outFile, { flags: 'a' });
  const times = { exitedAt: null as number | null };
  const exited = new Promise<void>((r) => child.on('exit', (code, sig) => {
    times.exitedAt = Date.now();
    out.end(`[chaos] process exited (${code ?? sig})\n`);
    r();
  }));
  let text = '';
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    out.write(d);
    if (err.length < 4_000) err += d;
  });
  const alive = () => child.exitCode === null && child.signalCode === null;
  const ready = new Promise<{ api: string; holderIds: string[] }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`host did not start within ${timeoutMs} ms: ${err.trim()}`)), timeoutMs);
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out.write(d);
      if (text.length < 20_000) text += d;
      const api = /listening on (http:\/\/127\.0\.0\.1:\d+\/api)/.exec(text)?.[1];
      const holders = /holder ids: ([^;]+);/.exec(text)?.[1];
      if (api && holders) {
        clearTimeout(timer);
        resolve({ api, holderIds: holders.split(', ').map((x) => x.split('=')[1]!) });
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`host exited before listening: ${err.trim()}`));
    });
  });
  try {
    const r = await ready;
    return { child, ...r, exited, alive, startedAt: Date.now(), get exitedAt() { return times.exitedAt; }, signal: (sig) => void (alive() && child.kill(sig)) };
  } catch (e) {
    if (alive()) child.kill('SIGKILL');
    await exited;
    throw e;
  }
}

/** SIGCONT (for stopped ones) and SIGKILL every host still running; wait for all to exit. */
export async function killHosts(hosts: ChaosHost[]): Promise<void> {
  for (const h of hosts) {
    if (h.alive()) {
      h.child.kill('SIGCONT');
      h.child.kill('SIGKILL');
    }
  }
  await Promise.all(hosts.map((h) => h.exited));
}
