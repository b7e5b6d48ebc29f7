// OpenTelemetry is set up before the modules it instruments load: with APPLICATIONINSIGHTS_CONNECTION_STRING set,
// loading a function file (as the worker does) installs Azure Monitor first, so pg (loaded later, when the app
// opens its stores) and http are patched by the instrumentations. Without the setting nothing is installed.
// Real child processes on the compiled dist/ (the worker loads compiled files); the endpoint is unreachable.
import { spawnSync } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, ROOT } from '../support/localHostProcess.js';

const PROBE = `
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
const root = process.env.PROBE_ROOT;
const { installFunctionsCore } = await import(pathToFileURL(root + '/dist/src/local/functionsCore.js').href);
installFunctionsCore();
await import(pathToFileURL(root + '/dist/functions/readyz.js').href);
await import(pathToFileURL(root + '/dist/src/store/postgres/db.js').href); // what openStores loads at app start
const require = createRequire(root + '/package.json');
console.log(JSON.stringify({ pg: !!require('pg').Client.prototype.query.__wrapped, http: !!require('http').request.__wrapped }));
process.exit(0); // the exporter would retry the unreachable endpoint
`;

function probe(env: Record<string, string>): { pg: boolean; http: boolean } {
  const clean = { ...process.env };
  delete clean.APPLICATIONINSIGHTS_CONNECTION_STRING;
  delete clean.APPLICATIONINSIGHTS_AUTHENTICATION_STRING;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', PROBE], { env: { ...clean, PROBE_ROOT: ROOT, ...env }, encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`probe failed (${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as { pg: boolean; http: boolean };
}

describe('telemetry preload', () => {
  beforeAll(() => ensureBuilt(), 120_000);

  it('with Application Insights configured, pg and http are instrumented; without, nothing is', () => {
    expect(probe({ APPLICATIONINSIGHTS_CONNECTION_STRING: 'InstrumentationKey=00000000-0000-0000-0000-000000000000;IngestionEndpoint=http://127.0.0.1:9/' }))
      .toEqual({ pg: true, http: true });
    expect(probe({})).toEqual({ pg: false, http: false });
  }, 240_000);

  it('every function file imports the preload first', async () => {
    const { readdirSync, readFileSync } = await import('node:fs');
    for (const f of readdirSync(`${ROOT}/functions`).filter((x) => x.endsWith('.ts'))) {
      const firstImport = readFileSync(`${ROOT}/functions/${f}`, 'utf8').split('\n').find((l) => l.startsWith('import '));
      expect(firstImport, f).toMatch(/^import '\.\.\/src\/instrument\/telemetryPreload\.js';/);
    }
  });
});
