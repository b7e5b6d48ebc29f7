// The compiled app, loaded the way the Functions worker loads it (package.json main glob, with a
// stand-in @azure/functions-core): every function's trigger, route, methods, auth level and schedule.
import { beforeAll, describe, expect, it } from 'vitest';
import { loadRegisteredFunctions, type Registry } from '../../src/local/functionsCore.js';

let reg: Registry;
beforeAll(async () => {
  reg = await loadRegisteredFunctions(process.cwd());
});

const http = (name: string, methods: string[], route: string, authLevel: string) => ({ name, methods, route, authLevel });

describe('function registrations', () => {
  it.each([
    http('postIntent', ['POST'], 'intents', 'function'),
    http('listIntents', ['GET'], 'intents', 'function'),
    http('getIntent', ['GET'], 'intents/{id}', 'function'),
    http('getIntentAttempts', ['GET'], 'intents/{id}/attempts', 'function'),
    http('cancelIntent', ['POST'], 'intents/{id}/cancel', 'function'),
    http('rescheduleIntent', ['POST'], 'intents/{id}/reschedule', 'function'),
    http('getLease', ['GET'], 'lease', 'function'),
    http('getLeases', ['GET'], 'leases', 'function'),
    http('getPartitionLease', ['GET'], 'leases/{partition}', 'function'),
    http('getInstances', ['GET'], 'instances', 'function'),
    http('healthz', ['GET'], 'healthz', 'anonymous'),
    http('readyz', ['GET'], 'readyz', 'anonymous'),
    http('metrics', ['GET'], 'metrics', 'function'),
    http('openapi', ['GET'], 'openapi.json', 'anonymous'),
    http('releaseLease', ['POST'], 'ops/lease/release', 'admin'),
    http('getHandovers', ['GET'], 'ops/lease/release', 'admin'),
    http('getExecution', ['GET'], 'ops/execution', 'admin'),
    http('pauseExecution', ['POST'], 'ops/execution/pause', 'admin'),
    http('resumeExecution', ['POST'], 'ops/execution/resume', 'admin'),
    http('redriveIntents', ['POST'], 'ops/intents/redrive', 'admin'),
    http('postPartitions', ['POST'], 'ops/partitions', 'admin'),
    http('getPartitions', ['GET'], 'ops/partitions', 'admin'),
    http('getPartitionChange', ['GET'], 'ops/partitions/{changeId}', 'admin'),
    http('cancelPartitionChange', ['POST'], 'ops/partitions/{changeId}/cancel', 'admin'),
    http('dashboard', ['GET'], 'dashboard', 'admin'),
  ])('$name: $methods /api/$route ($authLevel)', (want) => {
    const f = reg.functions.find((x) => x.name === want.name);
    expect(f, `function ${want.name} registered`).toBeDefined();
    expect(f!.trigger).toMatchObject({ type: 'httpTrigger', direction: 'in', route: want.route, methods: want.methods, authLevel: want.authLevel });
    expect(Object.values(f!.bindings).some((b) => b.type === 'http' && b.direction === 'out')).toBe(true);
  });

  it('executorTimer: %EXECUTOR_SCHEDULE%, runOnStartup false, useMonitor false (sub-minute schedule)', () => {
    const f = reg.functions.find((x) => x.name === 'executorTimer');
    expect(f?.trigger).toMatchObject({ type: 'timerTrigger', schedule: '%EXECUTOR_SCHEDULE%', runOnStartup: false, useMonitor: false });
  });

  it('registers exactly these functions and an appTerminate hook', () => {
    expect(reg.functions.map((f) => f.name).sort()).toEqual([
      'cancelIntent', 'cancelPartitionChange', 'dashboard', 'executorTimer', 'getExecution', 'getHandovers', 'getInstances', 'getIntent', 'getIntentAttempts', 'getLease', 'getLeases',
      'getPartitionChange', 'getPartitionLease', 'getPartitions', 'healthz', 'listIntents',
      'metrics', 'openapi', 'pauseExecution', 'postIntent', 'postPartitions', 'readyz', 'redriveIntents', 'releaseLease', 'rescheduleIntent', 'resumeExecution']);
    expect(reg.hooks.map((h) => h.name)).toEqual(['appTerminate']);
  });

  it('no route starts with "admin": the Functions host reserves it for its admin API, also under /api', () => {
    for (const f of reg.functions) {
      if (typeof f.trigger.route === 'string') expect(f.trigger.route, f.name).not.toMatch(/^admin(\/|$)/i);
      expect(f.name, f.name).not.toMatch(/^admin/i);
    }
  });

  it('function files stay thin', async () => {
    const { readdirSync, readFileSync } = await import('node:fs');
    for (const f of readdirSync('functions')) {
      const lines = readFileSync(`functions/${f}`, 'utf8').split('\n').length;
      expect(lines, f).toBeLessThanOrEqual(40);
    }
  });
});
