// POST /api/ops/execution/resume — clear the cluster-wide pause flag.
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { httpHandler } from '../src/functionsHost.js';
import { executionControlHandler } from '../src/opsHandlers.js';

azf.app.http('resumeExecution', {
  methods: ['POST'],
  route: 'ops/execution/resume',
  authLevel: 'admin',
  handler: httpHandler((app) => executionControlHandler(app, 'resume')),
});
