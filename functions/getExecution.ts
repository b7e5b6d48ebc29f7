// GET /api/ops/execution — the cluster-wide execution control row (paused, by whom, why, since when).
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { getApp } from '../src/app.js';
import { httpHandler } from '../src/http/functionsHost.js';
import { executionControlHandler } from '../src/http/ops.js';

azf.app.http('getExecution', {
  methods: ['GET'],
  route: 'ops/execution',
  authLevel: 'admin',
  handler: httpHandler(getApp, (app) => executionControlHandler(app, null)),
});
