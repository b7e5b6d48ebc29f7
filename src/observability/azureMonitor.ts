// Azure: when APPLICATIONINSIGHTS_CONNECTION_STRING is set, useAzureMonitor() (once per process: it installs
// the global OpenTelemetry providers and the instrumentations) with our pull reader added, so the same
// instruments are exported to Application Insights and served at /api/metrics. Synchronous, so the telemetry
// preload (src/instrument/telemetryPreload.ts) runs it before pg, mssql and http are loaded: instrumentation only patches
// modules required after it. The distro is loaded with require (its CommonJS build) and only when configured:
// it is large and unused locally. Only the preload and the composition root call this.
import { createRequire } from 'node:module';
import { MetricsRegistry, PullMetricReader } from './metrics.js';

const require = createRequire(import.meta.url);
let registry: MetricsRegistry | null = null;

/** `aad` set (Application Insights with local auth disabled): export with a managed identity token. */
export function setupAzureMonitor(connectionString: string, aad: { clientId: string | null } | null = null): MetricsRegistry {
  if (registry) return registry;
  const { useAzureMonitor } = require('@azure/monitor-opentelemetry') as typeof import('@azure/monitor-opentelemetry');
  const { metrics } = require('@opentelemetry/api') as typeof import('@opentelemetry/api');
  let credential;
  if (aad) {
    const { ManagedIdentityCredential } = require('@azure/identity') as typeof import('@azure/identity');
    credential = aad.clientId ? new ManagedIdentityCredential({ clientId: aad.clientId }) : new ManagedIdentityCredential();
  }
  const reader = new PullMetricReader();
  useAzureMonitor({ azureMonitorExporterOptions: { connectionString, ...(credential ? { credential } : {}) }, metricReaders: [reader] });
  const provider = metrics.getMeterProvider();
  // Shared by the whole process: an app's close only flushes (the distro's own shutdown ends the process's export).
  const flush = provider as unknown as { forceFlush?: () => Promise<void> };
  registry = new MetricsRegistry(provider, reader, { shutdown: async () => flush.forceFlush?.() });
  return registry;
}

/** The process-wide registry (set up now if the preload did not). */
export async function azureMonitorRegistry(connectionString: string, aad: { clientId: string | null } | null = null): Promise<MetricsRegistry> {
  return setupAzureMonitor(connectionString, aad);
}
