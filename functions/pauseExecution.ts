// POST /api/ops/execution/pause — set the cluster-wide pause flag (SQL); every leader starts nothing while set.
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { getApp } from '../src/app.js';
import { httpHandler } from '../src/http/functionsHost.js';
import { executionControlHandler } from '../src/http/ops.js';

azf.app.http('pauseExecution', {
  methods: ['POST'],
  route: 'ops/execution/pause',
  authLevel: 'admin',
  handler: httpHandler(getApp, (app) => executionControlHandler(app, 'pause')),
});
