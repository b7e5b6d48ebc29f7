// GET /api/openapi.json — the OpenAPI 3.1 document (no database round trip; served even while starting).
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { openApiHandler } from '../src/http/openapi/document.js';

azf.app.http('openapi', {
  methods: ['GET'],
  route: 'openapi.json',
  authLevel: 'anonymous',
  handler: async () => {
    const r = await openApiHandler();
    return { status: r.status, headers: r.headers, body: r.body };
  },
});
