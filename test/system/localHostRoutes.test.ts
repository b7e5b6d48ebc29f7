// The local host's small pure parts: the route template matcher, timer schedule resolution (`%NAME%` →
// environment → setting default; invalid → ConfigError naming the setting), local settings validation,
// and routing a previous run's demo-provider URL to the current one.
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { bySpecificity, compileRoute } from '../../src/local/routeTemplate.js';
import { resolveTimerFunctions } from '../../src/local/timers.js';
import { loadLocalSettings, withLocalDefaults } from '../../src/local/localSettings.js';
import { DEMO_PROVIDER_PATH, DemoRoutingProvider } from '../../src/local/demoProvider.js';
import type { RegisteredFunction } from '../../src/local/functionsCore.js';

const ID = '01a214f3-06ac-75d0-8e22-a34060b5de36';

describe('route templates', () => {
  it.each([
    ['intents/{id}', `intents/${ID}`, { id: ID }],
    ['intents/{id}', `Intents/${ID}/`, { id: ID }],
    ['intents/{id}', 'intents', null],
    ['intents/{id}', `intents/${ID}/cancel`, null],
    ['intents/{id}/cancel', `intents/${ID}/cancel`, { id: ID }],
    ['intents/{id:guid}', `intents/${ID}`, { id: ID }],
    ['intents/{id:guid}', 'intents/42', null],
    ['items/{n:int}', 'items/42', { n: '42' }],
    ['items/{n:int}', 'items/4x', null],
    ['items/{n:int:min(10)}', 'items/9', null],
    ['items/{name:alpha:maxlength(3)}', 'items/abc', { name: 'abc' }],
    ['items/{name:alpha:maxlength(3)}', 'items/abcd', null],
    ['intents/{id?}', 'intents', {}],
    ['intents/{id?}', 'intents/x', { id: 'x' }],
    ['files/{*rest}', 'files/a/b%20c', { rest: 'a/b c' }],
    ['files/{*rest}', 'files', {}],
    ['healthz', 'healthz', {}],
    ['healthz', 'readyz', null],
  ])('%s matches %s → %j', (template, path, expected) => {
    expect(compileRoute(template).match(path)).toEqual(expected);
  });

  it('rejects what it cannot match faithfully, naming the template', () => {
    expect(() => compileRoute('a/{x=1}')).toThrow(/a\/\{x=1\}/);
    expect(() => compileRoute('a/{x:regex(^a$)}')).toThrow(/unsupported/);
    expect(() => compileRoute('a/{x?}/b')).toThrow(/optional/);
    expect(() => compileRoute('a/{*x}/b')).toThrow(/catch-all/);
    expect(() => compileRoute('a/{x}.{y}')).toThrow(/unsupported segment/);
  });

  it('prefers literal segments over parameters', () => {
    const routes = [compileRoute('intents/{id}'), compileRoute('intents/latest')].sort(bySpecificity);
    expect(routes.map((r) => r.template)).toEqual(['intents/latest', 'intents/{id}']);
  });
});

const timerFn = (schedule: string, runOnStartup = false): RegisteredFunction => ({
  name: 'executorTimer', bindings: {}, handler: () => undefined,
  trigger: { type: 'timerTrigger', direction: 'in', schedule, runOnStartup },
});

describe('timer schedules', () => {
  it('resolves %NAME% from the environment, else the setting default', () => {
    expect(resolveTimerFunctions([timerFn('%EXECUTOR_SCHEDULE%')], {})[0]!.schedule).toBe('*/10 * * * * *');
    const t = resolveTimerFunctions([timerFn('%EXECUTOR_SCHEDULE%', true)], { EXECUTOR_SCHEDULE: '*/2 * * * * *' })[0]!;
    expect(t).toMatchObject({ schedule: '*/2 * * * * *', setting: 'EXECUTOR_SCHEDULE', runOnStartup: true });
    expect(resolveTimerFunctions([timerFn('0 */5 * * * *')], {})[0]!.setting).toBeNull();
  });

  it.each([
    ['*/x * * * * *', /EXECUTOR_SCHEDULE .*not a valid NCRONTAB/],
    ['*/10 * * * *', /EXECUTOR_SCHEDULE .*6-field/],
    ['0 0 0 31 2 *', /EXECUTOR_SCHEDULE .*never fires/],
  ])('fails naming the setting for %s', (value, message) => {
    expect(() => resolveTimerFunctions([timerFn('%EXECUTOR_SCHEDULE%')], { EXECUTOR_SCHEDULE: value })).toThrow(ConfigError);
    expect(() => resolveTimerFunctions([timerFn('%EXECUTOR_SCHEDULE%')], { EXECUTOR_SCHEDULE: value })).toThrow(message);
  });

  it('fails for an unknown setting reference', () => {
    expect(() => resolveTimerFunctions([timerFn('%NO_SUCH_SETTING%')], {})).toThrow(/NO_SUCH_SETTING is not set/);
  });
});

describe('local settings', () => {
  it('has zero-config defaults', () => {
    expect(loadLocalSettings({})).toEqual({
      port: 7071, instances: 3, functionKey: null, adminKey: null,
      demoProvider: { latencyMs: 50, failureRate: 0.2, verbose: true, fence: false }, logFile: '.data/host.log',
      timerMode: 'singleton', storage: null, hostId: 'submission-manager',
    });
    expect(loadLocalSettings({ TIMER_MODE: 'every-instance', AzureWebJobsStorage: 'UseDevelopmentStorage=true' }))
      .toMatchObject({ timerMode: 'every-instance', storage: 'UseDevelopmentStorage=true' });
    expect(withLocalDefaults({}).DATABASE_URL).toBe('pglite:.data/pglite');
    expect(withLocalDefaults({ SQL_SERVER: 'x', SQL_DATABASE: 'y' }).DATABASE_URL).toBeUndefined();
    expect(loadLocalSettings({ LOG_FILE: '-' }).logFile).toBeNull();
  });

  it.each([['PORT', '70000'], ['INSTANCES', '0'], ['DEMO_PROVIDER_FAILURE_RATE', '1.5'], ['DEMO_PROVIDER_LATENCY_MS', 'slow'],
    ['TIMER_MODE', 'sometimes'], ['AzureFunctionsWebHost__hostid', 'Not_Valid']])(
    '%s=%s fails naming the setting', (name, value) => {
      expect(() => loadLocalSettings({ [name]: value })).toThrow(new RegExp(`^${name}: `));
    });
});

describe('demo provider routing', () => {
  it('sends a previous run\'s demo URL to the current demo provider, and leaves other URLs alone', () => {
    const current = `http://127.0.0.1:40001${DEMO_PROVIDER_PATH}`;
    const p = new DemoRoutingProvider(current);
    expect(p.route(`http://127.0.0.1:39999${DEMO_PROVIDER_PATH}`)).toBe(current);
    expect(p.route(null)).toBe(current);
    expect(p.route('https://provider.example/submit')).toBe('https://provider.example/submit');
    p.close();
  });
});
