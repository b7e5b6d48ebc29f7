// GET /api/intents/{id} — thin: the handler in src/ validates and maps; this file only registers the route.
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { getApp } from '../src/app.js';
import { httpHandler } from '../src/http/functionsHost.js';

azf.app.http('getIntent', {
  methods: ['GET'],
  route: 'intents/{id}',
  authLevel: 'function',
  handler: httpHandler(getApp, (app) => app.handlers.getIntent),
});
