// GET /api/healthz — HTTP availability and the release this instance runs (no database round trip).
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { healthz } from '../src/http/health.js';

azf.app.http('healthz', {
  methods: ['GET'],
  route: 'healthz',
  authLevel: 'anonymous',
  handler: async (req) => {
    const r = await healthz(req.headers.get('accept') ?? '');
    return { status: r.status, headers: r.headers, body: r.body };
  },
});
