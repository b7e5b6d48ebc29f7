// Azure: when APPLICATIONINSIGHTS_CONNECTION_STRING is set, useAzureMonitor() (once per process: it installs
// the global OpenTelemetry providers) with our pull reader added, so the same instruments are exported to
// Application Insights and served at /api/metrics. Loaded lazily: the distro is large and unused locally.
// Only the composition root calls this; nothing else reads the global meter provider.
import { MetricsRegistry, PullMetricReader } from './metrics.js';

let setup: Promise<MetricsRegistry> | null = null;

/** `aad` set (Application Insights with local auth disabled): export with a managed identity token. */
export function azureMonitorRegistry(connectionString: string, aad: { clientId: string | null } | null = null): Promise<MetricsRegistry> {
  setup ??= (async () => {
    const { useAzureMonitor } = await import('@azure/monitor-opentelemetry');
    const { metrics } = await import('@opentelemetry/api');
    let credential;
    if (aad) {
      const { ManagedIdentityCredential } = await import('@azure/identity');
      credential = aad.clientId ? new ManagedIdentityCredential({ clientId: aad.clientId }) : new ManagedIdentityCredential();
    }
    const reader = new PullMetricReader();
    useAzureMonitor({ azureMonitorExporterOptions: { connectionString, ...(credential ? { credential } : {}) }, metricReaders: [reader] });
    const provider = metrics.getMeterProvider();
    // Shared by the whole process: an app's close only flushes (the distro's own shutdown ends the process's export).
    const flush = provider as unknown as { forceFlush?: () => Promise<void> };
    return new MetricsRegistry(provider, reader, { shutdown: async () => flush.forceFlush?.() });
  })().catch((e: unknown) => {
    setup = null;
    throw e;
  });
  return setup;
}
