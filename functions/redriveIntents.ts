// POST /api/ops/intents/redrive — failed intents back to scheduled with a fresh attempt budget (recorded).
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { getApp } from '../src/app.js';
import { httpHandler } from '../src/http/functionsHost.js';
import { redriveHandler } from '../src/http/redrive.js';

azf.app.http('redriveIntents', {
  methods: ['POST'],
  route: 'ops/intents/redrive',
  authLevel: 'admin',
  handler: httpHandler(getApp, redriveHandler),
});
