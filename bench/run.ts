// `npm run bench`: every benchmark in turn (or the ones named: `npm run bench -- intake failover`), each
// printing its table, then one line of ratios per benchmark. Benchmarks never fail on speed.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { machine } from './support.js';

const ALL = ['intake', 'execution', 'peers', 'pickup', 'failover', 'refreshLag', 'rebuild', 'idleCost', 'tracing', 'mariadb', 'partitions', 'partitionChange', 'partitionChangeLarge', 'unsettledIndex', 'intakeLock', 'largeOperations', 'statusIndexIntake', 'profile'] as const;
const here = path.dirname(fileURLToPath(import.meta.url));

const picked = process.argv.slice(2).filter((a) => (ALL as readonly string[]).includes(a));
const names = picked.length ? picked : [...ALL];
console.log(`# SubmissionManager benchmarks — ${machine()} — ${new Date().toISOString()}`);
const ratios: string[] = [];
let failed = 0;
for (const name of names) {
  // Each benchmark in its own process (clean heap for the rebuild measurement; --expose-gc for it).
  const t0 = Date.now();
  const r = spawnSync(process.execPath, ['--expose-gc', path.join(here, `${name}.js`)], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
  process.stdout.write(r.stdout.replace(/\nratios: .*\n?$/, '\n'));
  const line = /ratios: (.*)/.exec(r.stdout)?.[1];
  if (r.status !== 0 || !line) failed++;
  ratios.push(`${name} (${Math.round((Date.now() - t0) / 1000)} s): ${line && r.status === 0 ? line : `failed (exit ${r.status})${line ? `: ${line}` : ''}`}`);
}
console.log('\n## Ratios');
for (const l of ratios) console.log(`- ${l}`);
process.exit(failed ? 1 : 0);
