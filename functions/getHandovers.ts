// GET /api/ops/lease/release — the handover requests: the pending one and the newest completed (from SQL).
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { getApp } from '../src/app.js';
import { httpHandler } from '../src/http/functionsHost.js';
import { handoversHandler } from '../src/http/ops.js';

azf.app.http('getHandovers', {
  methods: ['GET'],
  route: 'ops/lease/release',
  authLevel: 'admin',
  handler: httpHandler(getApp, (app) => handoversHandler(app)),
});
