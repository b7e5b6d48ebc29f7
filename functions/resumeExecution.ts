// POST /api/ops/execution/resume — clear the cluster-wide pause flag.
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { getApp } from '../src/app.js';
import { httpHandler } from '../src/http/functionsHost.js';
import { executionControlHandler } from '../src/http/ops.js';

azf.app.http('resumeExecution', {
  methods: ['POST'],
  route: 'ops/execution/resume',
  authLevel: 'admin',
  handler: httpHandler(getApp, (app) => executionControlHandler(app, 'resume')),
});
