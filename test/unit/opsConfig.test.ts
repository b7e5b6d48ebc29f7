// Operations settings: RETENTION_DAYS (default 30, 0 = keep forever) and the Application Insights settings.
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('operations settings', () => {
  it('RETENTION_DAYS: default 30 days, 0 disables, bad values name the setting', () => {
    expect(loadConfig({}).retention).toEqual({ days: 30, olderThanMs: 30 * 86_400_000, batchSize: 1_000, maxBatchesPerTick: 5, intervalMs: 60_000 });
    expect(loadConfig({ RETENTION_DAYS: '0' }).retention.olderThanMs).toBe(0);
    expect(loadConfig({ RETENTION_DAYS: ' ' }).retention.days).toBe(30);
    for (const bad of ['-1', '1.5', 'week']) {
      expect(() => loadConfig({ RETENTION_DAYS: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ RETENTION_DAYS: bad })).toThrow(/RETENTION_DAYS/);
    }
  });

  it('Application Insights: connection string optional; AAD authentication string parsed (user- or system-assigned)', () => {
    expect(loadConfig({}).telemetry).toEqual({ appInsightsConnectionString: null, aad: null });
    const cs = 'InstrumentationKey=00000000-0000-0000-0000-000000000000;IngestionEndpoint=https://x.in.applicationinsights.azure.com/';
    expect(loadConfig({ APPLICATIONINSIGHTS_CONNECTION_STRING: cs, APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=abc-123;Authorization=AAD' }).telemetry)
      .toEqual({ appInsightsConnectionString: cs, aad: { clientId: 'abc-123' } });
    expect(loadConfig({ APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'Authorization=aad' }).telemetry.aad).toEqual({ clientId: null });
    expect(() => loadConfig({ APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=abc' })).toThrow(/APPLICATIONINSIGHTS_AUTHENTICATION_STRING/);
  });
});
