// GET /api/dashboard — the operator dashboard (HTML; JSON views with ?data=…). Admin level: `?code=<key>` in a browser.
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { getApp } from '../src/app.js';
import { httpHandler } from '../src/http/functionsHost.js';
import { dashboardHandler } from '../src/http/dashboard/handler.js';

azf.app.http('dashboard', {
  methods: ['GET'],
  route: 'dashboard',
  authLevel: 'admin',
  handler: httpHandler(getApp, dashboardHandler),
});
