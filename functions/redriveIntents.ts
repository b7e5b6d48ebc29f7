// POST /api/ops/intents/redrive — failed intents back to scheduled with a fresh attempt budget (recorded).
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { httpHandler } from '../src/functionsHost.js';
import { redriveHandler } from '../src/operate/redrive.js';

azf.app.http('redriveIntents', {
  methods: ['POST'],
  route: 'ops/intents/redrive',
  authLevel: 'admin',
  handler: httpHandler(redriveHandler),
});
