// GET /api/metrics — Prometheus text of the instance that serves the request (series labelled holder_id).
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { getApp } from '../src/app.js';
import { httpHandler } from '../src/http/functionsHost.js';
import { metricsHandler } from '../src/http/metrics.js';

azf.app.http('metrics', {
  methods: ['GET'],
  route: 'metrics',
  authLevel: 'function',
  handler: httpHandler(getApp, (app) => metricsHandler(app)),
});
