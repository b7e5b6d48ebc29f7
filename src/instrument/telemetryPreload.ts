// Imported FIRST by every function file (functions/*.ts), before @azure/functions and anything that loads pg,
// mssql or http: with APPLICATIONINSIGHTS_CONNECTION_STRING set, Azure Monitor OpenTelemetry is set up here,
// synchronously, so its instrumentations patch those modules when they load (a lazy setup after they were
// loaded leaves them uninstrumented). Without the setting it does nothing. A failure here is reported and
// left to the app's start (configuration errors name the setting there), never thrown from a module load.
import { loadTelemetryConfig } from '../config.js';
import { setupAzureMonitor } from '../observability/azureMonitor.js';

try {
  const t = loadTelemetryConfig();
  if (t.appInsightsConnectionString) setupAzureMonitor(t.appInsightsConnectionString, t.aad);
} catch (e) {
  process.stderr.write(`SubmissionManager: telemetry not set up at load: ${(e as Error).message}\n`);
}
