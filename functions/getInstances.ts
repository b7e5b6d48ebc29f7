// GET /api/instances — the instances' heartbeat rows (holder, version, roles, last seen, partitions led), from SQL.
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { getApp } from '../src/app.js';
import { httpHandler } from '../src/http/functionsHost.js';
import { instancesHandler } from '../src/http/instances.js';

azf.app.http('getInstances', {
  methods: ['GET'],
  route: 'instances',
  authLevel: 'function',
  handler: httpHandler(getApp, (app) => instancesHandler(app)),
});
