// GET /api/healthz — HTTP availability only (no database round trip).
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { healthz } from '../src/http/health.js';

azf.app.http('healthz', {
  methods: ['GET'],
  route: 'healthz',
  authLevel: 'anonymous',
  handler: async () => {
    const r = await healthz();
    return { status: r.status, headers: r.headers, body: r.body };
  },
});
